"""A resident embedded engine: it outlives the ``cortana`` that started it, for a while.

Loading a model takes seconds, and a new engine has none of the prompt the
last one read. With ``keep_alive=SECONDS`` the embedded engine runs in a
process of its own that the next ``cortana`` finds and uses, like Ollama's
keep-alive:

- **One per model file.** Its record, ``engines/<key>.json`` in Cortana's cache
  folder (private to the user: it holds the API key), names its process, address,
  key, engine version and settings; the key is a hash of the model file's path,
  size and modification time. A client whose Cortana or xllamacpp version, or whose
  window, threads or slots differ, does not use it: it starts an engine of its own
  that stops with it (the resident one ends after its idle time).
- **Leases, not guesses.** Every client holds a shared ``flock`` on
  ``engines/<key>.users`` while connected. The engine polls for an exclusive
  lock: when it gets one, nobody is connected, and after ``keep_alive`` seconds
  of that it removes its record and exits. The kernel drops the lock of a client
  that crashed or was killed, so a dead parent never keeps an engine alive past
  the timeout.
- **One start at a time.** Starting holds ``engines/<key>.lock``: a second
  ``cortana`` started meanwhile waits and then uses the engine the first one
  started.
- **Detached.** The engine process forks away from its launcher (no zombie in a
  long-lived parent, no terminal signals) and announces its address on a pipe,
  like the owned engine of ``cortana.models.embedded``.

    python -m cortana.models.resident --model PATH --record FILE --users FILE --keep-alive S [...]
    (then the API key on the first line of stdin)
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from cortana.config import cache_dir
from cortana.errors import EngineUnavailable
from cortana.models.engine_process import (
    INSTALL_HINT,
    READY,
    SAMPLE_SLOTS,
    SPECULATION,
    load_server,
    serve_arguments,
)

__all__ = ["ResidentServer", "engine_record_path"]

log = logging.getLogger(__name__)

PID_LINE = "CORTANA_RESIDENT_PID"
POLL_SECONDS = 0.5
"""How often the engine checks whether anyone is connected."""


def _versions() -> dict[str, str]:
    """What must match for a client to use an engine another process started."""
    found = {}
    for name in ("cortana", "xllamacpp"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "unknown"
    return found


def _engines_folder() -> Path:
    folder = cache_dir() / "engines"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    return folder


def engine_record_path(model_path: Path) -> Path:
    """The record of the resident engine of ``model_path`` (whether or not one runs)."""
    stat = model_path.stat()
    key = hashlib.sha256(f"{model_path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:24]
    return _engines_folder() / f"{key}.json"


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process took the number
        return False
    return True


@dataclass(frozen=True)
class _Wanted:
    model: str
    ctx: int
    threads: int
    batch_threads: int
    parallel: int
    slot_dir: str
    samples: int = SAMPLE_SLOTS
    speculation: str = SPECULATION

    def settings(self) -> dict[str, Any]:
        return {
            "ctx": self.ctx,
            "threads": self.threads,
            "batch_threads": self.batch_threads,
            "parallel": self.parallel,
            "slot_dir": self.slot_dir,
            "samples": self.samples,
            "speculation": self.speculation,
        }


class ResidentServer:
    """This process's lease on a resident engine: its address and key; :meth:`stop` lets go of it.

    Create it with :meth:`attach`. The engine keeps running after ``stop()`` until
    nobody has held a lease for its idle time.

    Attributes:
        url: the engine's address.
        api_key: the key its requests carry.
        pid: the engine's process id.
        reused: whether another process started it (its model was loaded already).
        slot_dir: the folder its prompt caches are saved to and restored from.
    """

    def __init__(self, record: dict[str, Any], lease: IO[str], reused: bool, slot_dir: Path | None) -> None:
        self.url: str | None = str(record["url"])
        self.api_key = str(record["api_key"])
        self.pid: int | None = int(record["pid"])
        self.reused = reused
        self.slot_dir = slot_dir
        self.log_path = cache_dir() / "embedded-engine.log"
        self._lease: IO[str] | None = lease

    @property
    def running(self) -> bool:
        """Whether this process still holds its lease and the engine is alive."""
        return self._lease is not None and _alive(self.pid)

    async def stop(self) -> None:
        """Let go of the engine (it stays for its idle time, for the next process)."""
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.close()  # closing drops the shared lock

    @classmethod
    async def attach(
        cls,
        model_path: Path,
        *,
        context_window: int,
        threads: int,
        batch_threads: int,
        parallel: int,
        slot_dir: Path | None,
        keep_alive: float,
        startup_timeout: float = 300.0,
    ) -> ResidentServer | None:
        """The resident engine of ``model_path``, started if none runs; None if the one running does not fit.

        "Does not fit": another Cortana or xllamacpp version, or another window, thread count or number
        of slots. The caller then starts an engine of its own.
        """
        # Files in the user's cache folder, stat'ed and opened at once: no need for threads here.
        record_path = engine_record_path(model_path)
        model = str(model_path.resolve())  # noqa: ASYNC240
        wanted = _Wanted(model, context_window * parallel, threads, batch_threads, parallel, str(slot_dir or ""))
        deadline = time.monotonic() + startup_timeout
        with open(record_path.with_suffix(".lock"), "a") as start_lock:  # noqa: ASYNC230
            await _flock(start_lock, fcntl.LOCK_EX, deadline, "another cortana starting this model's engine")
            lease = open(record_path.with_suffix(".users"), "a")  # noqa: SIM115, ASYNC230 - held until stop()
            try:
                # The engine holds this exclusively only for a moment (or while it exits).
                await _flock(lease, fcntl.LOCK_SH, deadline, "the resident engine to exit")
                record = _read_record(record_path)
                if record is not None and _alive(record.get("pid")):
                    if record.get("versions") != _versions() or record.get("settings") != wanted.settings():
                        log.info("the resident engine of %s runs other settings or versions", model_path.name)
                        lease.close()
                        return None
                    if await _answers(record, wanted.model):
                        return cls(record, lease, reused=True, slot_dir=slot_dir)
                record = await _launch(record_path, wanted, keep_alive, start_lock, deadline)
                return cls(record, lease, reused=False, slot_dir=slot_dir)
            except BaseException:
                lease.close()
                raise


async def _flock(file: IO[str], operation: int, deadline: float, waiting_for: str) -> None:
    """Take a lock, polling (a blocking flock in a thread could not be cancelled)."""
    while True:
        try:
            fcntl.flock(file, operation | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise EngineUnavailable(f"Timed out waiting for {waiting_for} ({file.name}).") from None
            await asyncio.sleep(0.05)


async def _answers(record: dict[str, Any], model: str) -> bool:
    """Whether the engine of ``record`` answers with its key and serves ``model``."""
    try:
        async with httpx.AsyncClient(timeout=5.0) as http:
            answer = await http.get(f"{record['url']}/props", headers={"Authorization": f"Bearer {record['api_key']}"})
        props = answer.json()
    except (httpx.HTTPError, ValueError, KeyError):
        return False
    return answer.status_code == 200 and isinstance(props, dict) and props.get("model_path") == model


async def _launch(
    record_path: Path, wanted: _Wanted, keep_alive: float, start_lock: IO[str], deadline: float
) -> dict[str, Any]:
    """Start the engine process and wait for its record (it writes it once the model is loaded)."""
    import secrets

    api_key = secrets.token_urlsafe(32)
    log_path = cache_dir() / "embedded-engine.log"
    args = [
        sys.executable, "-m", "cortana.models.resident",
        "--model", wanted.model,
        "--ctx", str(wanted.ctx),
        "--threads", str(wanted.threads),
        "--threads-batch", str(wanted.batch_threads),
        "--parallel", str(wanted.parallel),
        "--samples", str(wanted.samples),
        "--speculation", wanted.speculation,
        *(["--slot-save-path", f"{wanted.slot_dir}{os.sep}"] if wanted.slot_dir else []),
        "--record", str(record_path),
        "--keep-alive", str(keep_alive),
        "--start-lock-fd", str(start_lock.fileno()),
    ]  # fmt: skip
    with open(log_path, "ab") as log_file:  # noqa: ASYNC230 - opened for the child, which writes it
        launcher = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log_file,
            pass_fds=(start_lock.fileno(),),  # the engine holds the start lock until loaded, even if we die
        )
    assert launcher.stdin is not None and launcher.stdout is not None
    launcher.stdin.write(f"{api_key}\n".encode())
    launcher.stdin.close()
    pid: int | None = None
    try:
        async with asyncio.timeout(max(deadline - time.monotonic(), 1.0)):
            while line := (await launcher.stdout.readline()).decode(errors="replace"):
                if line.startswith(PID_LINE):
                    pid = int(line.split()[1])
                elif line.startswith(READY):
                    record = _read_record(record_path)
                    if record is None or record.get("pid") != pid:
                        raise EngineUnavailable(f"The resident engine wrote no record at {record_path}.")
                    return record
    except TimeoutError:
        raise EngineUnavailable(
            f"The resident engine did not load {Path(wanted.model).name} in time. See {log_path}."
        ) from None
    except BaseException:
        if pid is not None:  # cancelled or failed while it loads: it goes too
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        raise
    finally:
        await launcher.wait()  # the launcher exits as soon as it has forked
    raise EngineUnavailable(f"The resident engine exited while loading {Path(wanted.model).name}. See {log_path}.")


def _write_record(path: Path, record: dict[str, Any]) -> None:
    """Write the record where only this user can read it (it holds the API key), never half a file."""
    partial = path.with_name(f"{path.stem}.{os.getpid()}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(record, out)
    os.replace(partial, path)


def _remove_record(path: Path) -> None:
    """Remove the record if it is still this process's (a newer engine may have replaced it)."""
    record = _read_record(path)
    if record is not None and record.get("pid") == os.getpid():
        path.unlink(missing_ok=True)


def _idle_watch(users: Path, keep_alive: float) -> None:
    """Return once nobody has held a lease on ``users`` for ``keep_alive`` seconds, holding it exclusively."""
    idle_since: float | None = None
    while True:
        lease = open(users, "a")  # noqa: SIM115 - kept open (and locked) by the caller when it returns
        try:
            fcntl.flock(lease, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lease.close()
            idle_since = None
        else:
            now = time.monotonic()
            idle_since = now if idle_since is None else idle_since
            if now - idle_since >= keep_alive:
                return  # the lock stays held: a client arriving now waits until this process is gone
            lease.close()
        time.sleep(POLL_SECONDS)


def _serve(argv: list[str] | None = None) -> None:
    """The engine process: fork away, load the model, write the record, serve until idle."""
    parser = serve_arguments("python -m cortana.models.resident")
    parser.add_argument("--record", required=True)
    parser.add_argument("--keep-alive", type=float, required=True)
    parser.add_argument("--start-lock-fd", type=int, default=-1)
    args = parser.parse_args(argv)
    api_key = sys.stdin.readline().strip()
    if os.fork():
        os._exit(0)  # the launcher: its parent reaps it at once, and the engine belongs to no one's terminal
    os.setsid()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"{PID_LINE} {os.getpid()}", flush=True)
    record_path = Path(args.record)
    server = load_server(args, api_key)
    slot_dir = args.slot_save_path.rstrip(os.sep)
    record = {
        "pid": os.getpid(),
        "url": server.listening_address,
        "api_key": api_key,
        "model": args.model,
        "versions": _versions(),
        "settings": {
            "ctx": args.ctx,
            "threads": args.threads,
            "batch_threads": args.threads_batch,
            "parallel": args.parallel,
            "slot_dir": slot_dir,
            "samples": args.samples,
            "speculation": args.speculation,
        },
        "keep_alive": args.keep_alive,
        "started": time.time(),
    }
    _write_record(record_path, record)
    if args.start_lock_fd >= 0:
        os.close(args.start_lock_fd)  # loaded and recorded: the next cortana may look
    print(f"{READY} {server.listening_address}", flush=True)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, sys.stdout.fileno())  # the launcher's reader gets its end of file
    os.dup2(devnull, sys.stdin.fileno())
    try:
        _idle_watch(record_path.with_suffix(".users"), args.keep_alive)
    except SystemExit:
        pass
    finally:
        _remove_record(record_path)
    del server


if __name__ == "__main__":
    if importlib.util.find_spec("xllamacpp") is None:
        sys.exit(f"The embedded engine (xllamacpp) is not installed. {INSTALL_HINT}")
    _serve()
