"""Contacts and the name badges printed for them."""
