import pytest
from accounts import UserRecord
from accounts.store import UserStore


def test_display():
    assert UserRecord("Ada", "ada@example.org").display() == "Ada <ada@example.org>"


def test_add_and_find():
    store = UserStore()
    user = store.add("Ada", "Ada@Example.org")
    assert isinstance(user, UserRecord)
    assert store.find("ada@example.org") == user
    assert store.find("bob@example.org") is None


def test_one_account_per_address():
    store = UserStore()
    store.add("Ada", "ada@example.org")
    with pytest.raises(ValueError):
        store.add("Ada again", "ADA@example.org")
