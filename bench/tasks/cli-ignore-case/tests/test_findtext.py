import pytest
from findtext.cli import main

LOG = "started\nERROR disk full\nretrying\nError: disk still full\nerror count: 2\ndone\n"


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "app.log"
    path.write_text(LOG)
    return str(path)


def test_search_is_case_sensitive_by_default(log, capsys):
    assert main(["error", log]) == 0
    assert capsys.readouterr().out == "5: error count: 2\n"


def test_nothing_found(log, capsys):
    assert main(["warning", log]) == 1
    assert capsys.readouterr().out == ""


def test_ignore_case(log, capsys):
    assert main(["--ignore-case", "error", log]) == 0
    assert capsys.readouterr().out == "2: ERROR disk full\n4: Error: disk still full\n5: error count: 2\n"


def test_short_option_with_count(log, capsys):
    assert main(["-i", "-c", "DISK", log]) == 0
    assert capsys.readouterr().out == "2\n"
    assert main(["-c", "DISK", log]) == 1
    assert capsys.readouterr().out == "0\n"
