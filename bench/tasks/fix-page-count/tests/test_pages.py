import pytest
from pager.pages import page_count, page_items
from pager.render import footer


def test_exact_pages():
    assert page_count(10, 5) == 2


def test_partial_last_page():
    assert page_count(11, 5) == 3


def test_no_items():
    assert page_count(0, 5) == 0


def test_bad_page_size():
    with pytest.raises(ValueError):
        page_count(3, 0)


def test_items_on_last_page():
    items = [f"item{i}" for i in range(11)]
    assert page_items(items, 3, 5) == ["item10"]


def test_footer():
    assert footer(11, 5, 1) == "page 1 of 3"
