import pytest
from backup.config import load_config
from backup.prune import plan, to_delete

BACKUPS = [f"2024-03-{day:02d}.tar" for day in range(1, 11)]


def test_keep_given():
    config = load_config("[backup]\nsource = /home\nkeep = 2\ncompress = no\n")
    assert (config.source, config.keep, config.compress) == ("/home", 2, False)


def test_keep_defaults_to_seven():
    config = load_config("[backup]\nsource = /home\n")
    assert config.keep == 7
    assert config.compress is True


def test_plan_without_keep_deletes_only_the_oldest():
    assert plan("[backup]\nsource = /srv\n", BACKUPS) == ["2024-03-01.tar", "2024-03-02.tar", "2024-03-03.tar"]


def test_plan_with_keep():
    assert plan("[backup]\nsource = /srv\nkeep = 9\n", list(reversed(BACKUPS))) == ["2024-03-01.tar"]


def test_nothing_to_delete():
    assert to_delete(BACKUPS[:3], 5) == []


def test_source_is_required():
    with pytest.raises(KeyError):
        load_config("[backup]\nkeep = 3\n")
