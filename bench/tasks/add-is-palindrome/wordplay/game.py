"""Points for a word game."""

from wordplay.checks import is_anagram, vowel_count


def points(word: str, target: str) -> int:
    """Ten points for an anagram of ``target``, plus one for each vowel."""
    bonus = 10 if is_anagram(word, target) else 0
    return bonus + vowel_count(word)
