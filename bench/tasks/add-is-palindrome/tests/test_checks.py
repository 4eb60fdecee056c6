from wordplay.checks import is_anagram, is_palindrome, vowel_count


def test_palindromes():
    assert is_palindrome("level")
    assert is_palindrome("Racecar")
    assert is_palindrome("Never odd or even")


def test_not_palindromes():
    assert not is_palindrome("python")
    assert not is_palindrome("ab")


def test_empty_text_is_a_palindrome():
    assert is_palindrome("")


def test_existing_checks():
    assert is_anagram("Listen", "Silent")
    assert vowel_count("banana") == 3
