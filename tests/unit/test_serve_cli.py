"""``cortana serve`` on the command line: the key, loopback by default, and clear errors before anything starts."""

from __future__ import annotations

import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cortana.errors import UserError
from cortana.serve.keys import KEY_ENV, ServeKey, key_file, keys_match, serve_key


def cortana(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    return subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", *args], cwd=home, env=env, capture_output=True, text=True, timeout=60
    )


def test_a_key_is_made_once_kept_private_and_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv(KEY_ENV, raising=False)
    first = serve_key()
    made = key_file()
    assert first.made and first.source == str(made) and made == tmp_path / "cortana" / "serve.key"
    assert stat.S_IMODE(made.stat().st_mode) == 0o600 and len(first.key) > 40
    again = serve_key()
    assert (again.key, again.made) == (first.key, False), "the same key on the next start, not printed again"
    made.chmod(0o644)
    serve_key()
    assert stat.S_IMODE(made.stat().st_mode) == 0o600, "a key file others could read is narrowed"
    monkeypatch.setenv(KEY_ENV, "from-the-environment-123")
    assert serve_key() == ServeKey("from-the-environment-123", KEY_ENV)
    assert serve_key("given-on-the-command-line") == ServeKey("given-on-the-command-line", "--key")
    with pytest.raises(UserError, match="--key: the serve key must be at least 16 characters"):
        serve_key("short")
    assert keys_match(first.key, first.key) and not keys_match(first.key[:-1], first.key)


def test_another_address_needs_allow_remote(tmp_path: Path) -> None:
    done = cortana("serve", "--host", "0.0.0.0", home=tmp_path)
    assert done.returncode == 1
    assert "0.0.0.0 is reachable from other machines; serving there needs --allow-remote" in done.stderr
    assert not (tmp_path / ".config" / "cortana" / "serve.key").exists(), "refused before anything was made"


def test_a_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = cortana("serve", "--port", str(port), "--key", "k" * 20, home=tmp_path)
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "choose another port with --port" in done.stderr


def test_a_port_out_of_range_is_one_line_and_makes_no_key(tmp_path: Path) -> None:
    """Reproduces the report: `serve --port 99999` wrote the key, then failed with an unexpected error."""
    done = cortana("serve", "--port", "99999", home=tmp_path)
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        "cortana: --port 99999 is not a port: give 1-65535 (or 0 for any free one)"
    ]
    assert not (tmp_path / ".config" / "cortana" / "serve.key").exists()


def test_serve_takes_no_question(tmp_path: Path) -> None:
    done = cortana("serve", "what", "is", "this", home=tmp_path)
    assert done.returncode == 2 and "takes no question" in done.stderr
    help_text = cortana("serve", "--help", home=tmp_path).stdout
    assert "--allow-remote" in help_text and "--port" in help_text
    assert "--allow-remote" not in cortana("--help", home=tmp_path).stdout, "serve's options are serve's"


def test_cors_origins_from_a_folder_need_trust(tmp_path: Path) -> None:
    from cortana.trust import sensitive_sections

    assert sensitive_sections({"serve": {"cors_origins": ["https://evil.example"], "port": 9000}}) == {
        "serve.cors_origins": ["https://evil.example"]
    }


def test_a_new_key_is_not_printed_where_a_service_log_would_keep_it(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Started by a service manager (stderr not a terminal), the new key is kept in its file and the output says
    where, instead of printing it into the log."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    (tmp_path / "cortana.yml").write_text("memory:\n  recall: false\ngraphify:\n  enabled: false\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "cortana.cli.main", "serve", "--port", "0", "--no-heartbeat",
         "--engine", "llamacpp", "--base-url", scripted_engine.url],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        lines = []
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if line.startswith("API key"):
                break
    finally:
        process.terminate()
        process.wait(timeout=30)
    key = (tmp_path / ".config" / "cortana" / "serve.key").read_text().strip()
    assert "not printed: this is not a terminal" in lines[-1] and "serve.key" in lines[-1], lines
    assert key not in "".join(lines)
