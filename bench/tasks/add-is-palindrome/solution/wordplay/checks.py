"""Checks on words and phrases."""


def _letters(text: str) -> str:
    """``text`` in lowercase, without spaces."""
    return text.lower().replace(" ", "")


def is_anagram(first: str, second: str) -> bool:
    """Whether ``first`` and ``second`` use the same letters, ignoring case and spaces."""
    return sorted(_letters(first)) == sorted(_letters(second))


def is_palindrome(text: str) -> bool:
    """Whether ``text`` reads the same backwards, ignoring case and spaces."""
    letters = _letters(text)
    return letters == letters[::-1]


def vowel_count(text: str) -> int:
    """How many vowels ``text`` has."""
    return sum(letter in "aeiou" for letter in text.lower())
