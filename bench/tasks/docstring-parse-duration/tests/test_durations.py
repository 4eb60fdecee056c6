import pytest
from timeparse.durations import format_duration, parse_duration
from timeparse.timer import Timer


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1h30m", 5400), ("45s", 45), ("2m5s", 125), ("1h2m3s", 3723), (" 1h ", 3600), ("90m", 5400), ("0s", 0)],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "  ", "5", "1x", "h", "1h 30m", "30m1h", "1h1h", "-5s", "1.5h"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_format_duration():
    assert format_duration(5400) == "1h30m"
    assert format_duration(0) == "0s"


def test_timer():
    timer = Timer.from_text("1m30s")
    timer.tick(45)
    assert str(timer) == "45s"
