import pytest
from journal.cli import main

JOURNAL = "2024-05-03 planted tomatoes\n2024-05-01 bought seeds\n\n2024-05-09 first flower\n"


@pytest.fixture
def journal(tmp_path):
    path = tmp_path / "journal.txt"
    path.write_text(JOURNAL)
    return str(path)


def lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_oldest_first_by_default(journal, capsys):
    assert main([journal]) == 0
    assert lines(capsys) == ["2024-05-01  bought seeds", "2024-05-03  planted tomatoes", "2024-05-09  first flower"]


def test_limit(journal, capsys):
    assert main([journal, "--limit", "1"]) == 0
    assert lines(capsys) == ["2024-05-01  bought seeds"]


def test_reverse_lists_newest_first(journal, capsys):
    assert main([journal, "--reverse"]) == 0
    assert lines(capsys) == ["2024-05-09  first flower", "2024-05-03  planted tomatoes", "2024-05-01  bought seeds"]


def test_reverse_with_limit_shows_the_newest(journal, capsys):
    assert main(["--reverse", "--limit", "2", journal]) == 0
    assert lines(capsys) == ["2024-05-09  first flower", "2024-05-03  planted tomatoes"]
