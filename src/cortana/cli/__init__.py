"""The ``cortana`` command."""
