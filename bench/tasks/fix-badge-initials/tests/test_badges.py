from contacts.badges import badge, badges


def test_simple_badge():
    assert badge("ada lovelace") == "[AL] Ada Lovelace"


def test_badge_with_company():
    assert badge("Alan Turing", "NPL") == "[AT] Alan Turing (NPL)"


def test_badge_for_a_name_typed_with_extra_spaces():
    assert badge("  grace   hopper ") == "[GH] Grace Hopper"


def test_badges_are_sorted():
    guests = [("linus torvalds", ""), (" Barbara  Liskov", "MIT")]
    assert badges(guests) == ["[BL] Barbara Liskov (MIT)", "[LT] Linus Torvalds"]
