import json

import pytest
from fetcher.client import request_options
from fetcher.settings import load_settings


def write_config(tmp_path, **values):
    path = tmp_path / "fetcher.json"
    path.write_text(json.dumps(values))
    return path


def test_every_key_given(tmp_path):
    settings = load_settings(write_config(tmp_path, url="https://example.org", timeout=5, retries=1))
    assert (settings.url, settings.timeout, settings.retries) == ("https://example.org", 5.0, 1)


def test_timeout_defaults_to_30_seconds(tmp_path):
    settings = load_settings(write_config(tmp_path, url="https://example.org"))
    assert settings.timeout == 30
    assert settings.retries == 3


def test_request_options_without_a_timeout(tmp_path):
    options = request_options(write_config(tmp_path, url="https://example.org", retries=0))
    assert options == {"url": "https://example.org", "timeout": 30, "max_attempts": 1}


def test_url_is_still_required(tmp_path):
    with pytest.raises(KeyError):
        load_settings(write_config(tmp_path, timeout=10))
