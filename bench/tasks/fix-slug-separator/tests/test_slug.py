from textkit.slug import slugify
from textkit.urls import post_url


def test_default_separator_is_a_dash():
    assert slugify("Hello World") == "hello-world"


def test_extra_spaces_and_punctuation():
    assert slugify("  Many   spaces, here! ") == "many-spaces-here"


def test_other_separator():
    assert slugify("a b", sep="_") == "a_b"


def test_post_url():
    assert post_url("My First Post") == "/posts/my-first-post/"
