"""Fetching a URL, trying again when the server fails."""

import time
from collections.abc import Callable

from netclient.config import BACKOFF_SECONDS, MAX_RETRIES, USER_AGENT

Send = Callable[[str, dict[str, str]], int]


def fetch(url: str, send: Send, retries: int = MAX_RETRIES) -> int:
    """The status code of ``url``; a 5xx answer is tried again up to ``retries`` times."""
    headers = {"User-Agent": USER_AGENT}
    status = send(url, headers)
    for attempt in range(retries):
        if status < 500:
            break
        time.sleep(BACKOFF_SECONDS * (attempt + 1))
        status = send(url, headers)
    return status
