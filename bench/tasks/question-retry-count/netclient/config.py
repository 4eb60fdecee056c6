"""Defaults of the client."""

MAX_RETRIES = 4
BACKOFF_SECONDS = 1.5
USER_AGENT = "netclient/0.3"
