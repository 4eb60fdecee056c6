from notes.note import Note
from notes.text import count_words, normalize


def test_counts_each_word():
    assert count_words("The cat and the hat.") == {"the": 2, "cat": 1, "and": 1, "hat": 1}


def test_ignores_case_and_punctuation():
    assert count_words("Yes! yes, YES?") == {"yes": 3}


def test_empty_text():
    assert count_words("") == {}
    assert count_words("   ") == {}


def test_existing_helpers():
    assert normalize("Hi, there!") == "hi there"
    assert Note("Shopping\nmilk").heading == "Shopping"
