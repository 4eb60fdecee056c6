import pytest
from geometry.bounds import clamp, inside, width
from geometry.screen import keep_on_screen


def test_clamp_inside_the_range():
    assert clamp(5, 0, 10) == 5


def test_clamp_below_and_above():
    assert clamp(-3, 0, 10) == 0
    assert clamp(12, 0, 10) == 10
    assert clamp(2.5, 0.5, 1.5) == 1.5


def test_clamp_rejects_an_empty_range():
    with pytest.raises(ValueError):
        clamp(1, 10, 0)


def test_existing_helpers():
    assert inside(3, 1, 5) and not inside(7, 1, 5)
    assert width(2, 9) == 7


def test_keep_on_screen():
    assert keep_on_screen(100) == 79
    assert keep_on_screen(-1) == 0
