from utils.lists import chunks, dedupe, flatten
from utils.tags import parse_tags


def test_dedupe_keeps_the_first_of_each():
    assert dedupe([3, 1, 3, 2, 1]) == [3, 1, 2]
    assert dedupe([]) == []


def test_dedupe_with_a_key():
    assert dedupe(["apple", "Avocado", "banana", "blueberry"], key=lambda word: word[0].lower()) == ["apple", "banana"]


def test_dedupe_takes_any_iterable_and_changes_nothing():
    words = ["b", "a", "b"]
    assert dedupe(words) == ["b", "a"]
    assert words == ["b", "a", "b"]
    assert dedupe(letter for letter in "mississippi") == ["m", "i", "s", "p"]


def test_parse_tags():
    assert parse_tags("#python, #Python, #pytest,, #PYTEST") == ["python", "pytest"]


def test_other_helpers():
    assert chunks([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]
    assert flatten([[1], [], [2, 3]]) == [1, 2, 3]
