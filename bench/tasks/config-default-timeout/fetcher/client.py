"""What the fetcher hands to the HTTP library."""

from pathlib import Path

from fetcher.settings import load_settings


def request_options(config_path: str | Path) -> dict[str, object]:
    """The keyword arguments for one request, as the config file at ``config_path`` sets them."""
    settings = load_settings(config_path)
    return {"url": settings.url, "timeout": settings.timeout, "max_attempts": settings.retries + 1}
