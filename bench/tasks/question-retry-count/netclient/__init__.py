"""A small HTTP client with retries."""
