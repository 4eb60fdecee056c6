"""Downloads pages as a JSON settings file says."""
