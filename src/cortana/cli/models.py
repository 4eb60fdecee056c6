"""``cortana models``: what is installed, what fits this machine, and pulling, removing and choosing a model.

cortana models [--json]        installed models (bundled, and the GGUFs the Hugging Face cache, Ollama and LM Studio
                               hold, each with what it needs and whether it fits), the catalogue with what each
                               needs and how fast it runs here, running engines' models
cortana models measure         measure this machine's speed again (done once, on the first listing)
cortana models pull NAME       download (NAME from the catalogue, or hf:OWNER/REPO/FILE.gguf; ollama: and lmstudio:
                               names run where they are, with nothing to download)
cortana models rm NAME         delete a downloaded model
cortana models use NAME        write `engine: embedded` and `model: NAME` to your cortana.yml
cortana models warm            read the assistant's instructions and tools once into the engine's saved prompt
                               cache, so a first question in any new folder reads only itself (scripts/start
                               runs it after installing)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cortana.cli.session import settings_for
from cortana.config import Settings, user_config_path
from cortana.display import printable
from cortana.errors import CortanaError, UserError
from cortana.models import catalogue, speed
from cortana.models.catalogue import CATALOGUE, GIB, MachineMemory, machine_memory, memory_estimate, recommend
from cortana.models.embedded import ensure_model_file, installed_models, resolve_model_path
from cortana.models.engine_process import DEFAULT_CONTEXT_WINDOW
from cortana.models.gguf import GGUFError, GGUFInfo, read_gguf
from cortana.models.speed import Speed
from cortana.models.stores import OLLAMA_PREFIX, parse_ollama_name

__all__ = ["run_models"]

ACTIONS = ("list", "measure", "pull", "rm", "use", "warm")


async def run_models(args: argparse.Namespace) -> int:
    """``cortana models [list|pull|rm|use] [NAME]``."""
    words = list(args.prompt)
    action = words.pop(0) if words and words[0] in ACTIONS else "list"
    workspace = Path.cwd()
    err = Console(stderr=True)
    settings = settings_for(workspace, err)
    window = args.context_window or settings.context_window or DEFAULT_CONTEXT_WINDOW
    if action in ("list", "measure"):
        if words:
            raise UserError(f"cortana models: unknown action {words[0]!r}; use list, measure, pull, rm or use")
        speed = await _speed(err, again=action == "measure")
        return await _list(settings, args, window, speed)
    if action == "warm":
        if words:
            raise UserError("cortana models warm takes no name: it warms the model `cortana` starts (--model)")
        return await _warm(args, err)
    if len(words) != 1:
        raise UserError(f"cortana models {action} takes one model name (`cortana models` lists them)")
    name = words[0]
    if action == "pull":
        path = await asyncio.to_thread(
            catalogue.pull, name, window=window, checking=lambda line: err.print(line, style="dim", markup=False)
        )
        err.print(Text(printable(f"{name}: {path} ({_size(path.stat().st_size)}), checked.")), soft_wrap=True)
        _describe_file(err, path, window)
        err.print(
            Text(printable(f"Run it with `cortana --model {name}`, or make it the default: cortana models use {name}"))
        )
        return 0
    if action == "rm":
        if settings.model == name:
            raise UserError(f"{name} is the model your cortana.yml uses; choose another first (cortana models use …)")
        for role in ("sampler", "escalate"):
            named = getattr(settings.models, role)
            if named is not None and not named.own_engine and named.model == name:
                raise UserError(f"{name} is your cortana.yml's models.{role}; name another there first")
        path = catalogue.remove(name)
        err.print(Text(printable(f"Removed {name} ({path}).")))
        return 0
    return _use(err, name, window)


async def _warm(args: argparse.Namespace, err: Console) -> int:
    """Start the engine ``cortana`` would start (model, window, threads), have the assistant of an empty folder
    answer one token, and save the engine's prompt cache: what every new folder's first prompt begins with, its
    instructions and tools, read once here instead of at a first question (``EmbeddedClient.seed_prompt_cache``).
    Nothing to do when a cache of that model and window is there already, or the engine keeps none."""
    import tempfile

    from cortana.assistant import Assistant
    from cortana.cli.session import start_engine
    from cortana.models.base import ModelSettings
    from cortana.models.embedded import EmbeddedClient

    with tempfile.TemporaryDirectory(prefix="cortana-warm-") as folder:
        # A new folder's settings: the user's own cortana.yml and the environment, not this folder's file.
        settings = settings_for(Path(folder), err)
        client = await start_engine(args, settings, err, prompt_cache=folder)
        if not isinstance(client, EmbeddedClient) or client.prompt_cache is None:
            await client.aclose()
            err.print("Nothing to warm: only the embedded engine keeps a prompt cache between processes.")
            return 0
        name = printable(client.model)  # a file path may hold anything: shown as text, never as markup
        if client.restored_from is not None:
            await client.aclose()
            err.print(Text(f"{name}: warm already (its prompt cache is saved).", style="dim"))
            return 0
        started = time.perf_counter()
        reading = Text(f"{name}: reading the assistant's instructions and tools once, for every folder…")
        with err.status(reading):
            # The tools must be in the prompt read: the tool judge would send "Hello." without them.
            offered = settings.model_copy(update={"agent": settings.agent.model_copy(update={"tool_judge": False})})
            async with Assistant(Path(folder), offered, client=client, heartbeat=False) as assistant:
                agent = await assistant.agent()
                turn = ModelSettings(max_tokens=1, temperature=0)
                result = await agent.run("Hello.", settings=turn, remember=False)
        read = result.metrics.prompt_tokens - result.metrics.cached_prompt_tokens
        if not client.prompt_cache.is_file():  # closing the assistant closed the engine, which saves the cache
            err.print(Text(f"{name}: the engine saved no prompt cache; first answers will read it all."))
            return 1
        seconds = time.perf_counter() - started
        err.print(
            Text(
                f"{name}: read the assistant's {read:,}-token start once ({seconds:.1f} s); "
                "a first question in a new folder reads only itself now.",
                style="dim",
            ),
            soft_wrap=True,
        )
    return 0


def _size(size: int) -> str:
    return f"{size / GIB:.2f} GiB" if size >= GIB else f"{size / (1 << 20):.0f} MiB"


def _use(err: Console, name: str, window: int) -> int:
    _, path = resolve_model_path(name)
    info = read_gguf(path)
    need = memory_estimate(info, window).total
    memory = machine_memory()
    if need > memory.total:
        fits = catalogue.window_that_fits(info, memory.total)
        raise UserError(
            f"{name} needs about {need / GIB:.1f} GiB at a {window:,}-token window and this machine has "
            f"{memory.total / GIB:.1f} GiB" + (f"; set context_window: {fits} in cortana.yml" if fits else "")
        )
    config = user_config_path()
    if _names_main(config):
        raise UserError(
            f"{config} names the turn's model as models.main; write `main: {name}` there (and `engine: embedded`), "
            "or remove models.main and run this again"
        )
    write_settings(config, {"engine": "embedded", "model": name})
    err.print(
        Text(printable(f"{config}: engine: embedded, model: {name} (about {need / GIB:.1f} GiB at {window:,} tokens)"))
    )
    return 0


def _names_main(path: Path) -> bool:
    """Whether the cortana.yml at ``path`` sets ``models.main`` (a ``model:`` written beside it would contradict it)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False  # loading the settings said what is wrong with it already
    models = data.get("models") if isinstance(data, dict) else None
    return isinstance(models, dict) and models.get("main") is not None


def write_settings(path: Path, values: dict[str, str]) -> None:
    """Set top-level ``key: value`` lines of the YAML file at ``path``, keeping every other line as it is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    for key, value in values.items():
        line = f"{key}: {json.dumps(value)}"
        pattern = re.compile(rf"^{re.escape(key)}\s*:")
        for index, existing in enumerate(lines):
            if pattern.match(existing):
                lines[index] = line
                break
        else:
            lines.append(line)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
    partial.replace(path)


def _describe_file(console: Console, path: Path, window: int) -> None:
    try:
        info = read_gguf(path)
    except GGUFError as error:
        console.print(Text(printable(f"(its header could not be read: {error})"), style="yellow"))
        return
    need = memory_estimate(info, window).total
    console.print(
        Text(
            printable(
                f"{info.name or info.architecture}: {info.quantization or '?'}, trained for "
                f"{info.context_length or 0:,} tokens; about {need / GIB:.1f} GiB at a {window:,}-token window"
            )
        )
    )


async def _engines(settings: Settings, args: argparse.Namespace) -> dict[str, tuple[list[str], str | None]]:
    """engine -> (its models, the one in use) for the engine the command line or cortana.yml names (when it is
    not the embedded one) and for engines that answer on their usual addresses (Ollama, Docker Model Runner,
    llama.cpp)."""
    from cortana.models.factory import create_model_client, probe_engines

    chosen = args.engine or settings.engine
    found: dict[str, tuple[list[str], str | None]] = {}
    engines = sorted(await probe_engines())
    if chosen not in ("auto", "embedded"):
        engines = [chosen, *(engine for engine in engines if engine != chosen)]
    for engine in engines:
        configured = engine == chosen
        try:
            if configured:
                client = await create_model_client(engine, model=args.model, base_url=args.base_url, settings=settings)
            else:
                client = await create_model_client(engine)
        except Exception as error:  # an engine that answers the probe but not a client: say so, list the rest
            found[engine] = ([f"(could not list: {error})"], None)
            continue
        try:
            names = await client.list_models() if client.can_list_models else [client.model]
            found[engine] = (names, client.model if configured else None)
        finally:
            await client.aclose()
    return found


def _in_use(settings: Settings, args: argparse.Namespace) -> str | None:
    """The embedded engine's model that ``cortana`` would run, or None when another engine is chosen."""
    if (args.engine or settings.engine) not in ("auto", "embedded"):
        return None
    if args.model or settings.model:
        chosen = str(args.model or settings.model)
        if chosen.startswith(OLLAMA_PREFIX):  # ollama:llama3.2 is listed as Ollama lists it, ollama:llama3.2:latest
            with contextlib.suppress(CortanaError):
                return str(parse_ollama_name(chosen))
        return chosen
    installed = installed_models()
    return installed[0] if installed else None


async def _speed(err: Console, *, again: bool) -> Speed | None:
    """This machine's measured speed: kept from an earlier listing, else measured now on the smallest installed
    bundled model (None when none is installed, or the measurement failed: said on stderr)."""
    kept = None if again else speed.measured_speed()
    installed = installed_models()
    if kept is not None or not installed:
        if again and not installed:
            raise UserError("measuring needs a bundled model: pip install 'cortana[local-small]' (or [local])")
        return kept
    model = min(installed, key=lambda name: CATALOGUE[name].size)
    err.print(f"Measuring this machine once with {model} (some 20 s; `cortana models measure` again)…", style="dim")
    try:
        measured = await speed.measure(model)
    except (CortanaError, OSError) as error:
        err.print(Text(printable(f"cortana: could not measure this machine: {error}")), soft_wrap=True)
        return None
    speed.remember(measured)
    return measured


async def _list(settings: Settings, args: argparse.Namespace, window: int, measured: Speed | None) -> int:
    memory = machine_memory()
    in_use = _in_use(settings, args)
    installed, not_runnable, unreadable = _installed(window, memory)
    budget = settings.fix.budget_seconds
    speeds = _speeds(measured)
    choice, why = recommend(memory, window, _fix_time(speeds) if speeds else None, budget)
    roles = speed.recommend_roles(memory.total, window, measured, budget)
    engines = await _engines(settings, args)
    needs = {row["name"]: row["needs"] for row in installed}  # a file's own header says it better
    rows = [
        _catalogue_row(model, memory, window, needs.get(model.name), speeds.get(model.name))
        for model in CATALOGUE.values()
    ]
    if args.json:
        data = {
            "window": window,
            "machine": {
                "memory": memory.total,
                "available": memory.available,
                "gpu": memory.gpu,
                "speed": asdict(measured) if measured is not None else None,
                "fix_budget_seconds": budget,
            },
            "in_use": in_use,
            "installed": installed,
            "not_runnable": not_runnable,
            "unreadable_stores": unreadable,
            "catalogue": rows,
            "recommended": {"name": choice.name, "why": why},
            "roles": {role: asdict(found) for role, found in roles.items()},
            "engines": {engine: {"models": names, "in_use": used} for engine, (names, used) in engines.items()},
        }
        print(json.dumps(data, indent=2))
        return 0
    out = Console(highlight=False)
    table = Table(title="Installed", title_justify="left", box=None, pad_edge=False)
    table.add_column("model", no_wrap=True)
    for column in ("", "from", "size", "quant", "trained for", f"needs at {window:,}", "fits"):
        table.add_column(column, no_wrap=True)
    for row in installed:
        fits = "yes" if row["fits"] else f"at {row['fits_window']:,}" if row["fits_window"] else "no"
        table.add_row(  # a name on this disk is another tool's folder names: text, never markup
            Text(printable(row["name"])), "in use" if row["name"] == in_use else "", SOURCES[row["source"]],
            _size(row["size"]), row["quantization"] or "?", f"{row['context_length'] or 0:,}",
            f"{row['needs'] / GIB:.1f} GiB", fits,
        )  # fmt: skip
    out.print(table)
    for row in installed:
        out.print(Text(printable(f"  {row['name']}: {row['path']}"), style="dim"), soft_wrap=True)
        for note in row["notes"]:
            out.print(Text(printable(f"    {note}"), style="dim"), soft_wrap=True)
    if not_runnable:
        out.print("\nOn this disk, but not models the embedded engine runs (never loaded):")
        for row in not_runnable:
            line = f"  {row['name']} ({SOURCES[row['source']]}): {row['why']}"
            out.print(Text(printable(line), style="yellow"), soft_wrap=True)
    for line in unreadable:
        out.print(Text(printable(f"  {line}"), style="dim"), soft_wrap=True)
    gpu = (
        f"; GPU {memory.gpu_name} {memory.gpu / GIB:.0f} GiB (the embedded engine runs on the CPU)"
        if memory.gpu
        else ""
    )
    out.print(f"\nThis machine: {memory.total / GIB:.1f} GiB of memory, {memory.available / GIB:.1f} GiB free{gpu}.")
    catalogue_table = Table(title="Catalogue", title_justify="left", box=None, pad_edge=False)
    columns = ("model", "download", f"needs at {window:,}", "fits", "tokens/s", "a fix", "parameters", "")
    for column in columns:
        catalogue_table.add_column(column, no_wrap=True, justify="right" if column in ("tokens/s", "a fix") else "left")
    for row in rows:
        fast = row["speed"]
        catalogue_table.add_row(
            row["name"], "bundled" if row["bundled"] else f"~{row['size'] / GIB:.1f} GiB",
            f"{row['needs'] / GIB:.1f} GiB", "yes" if row["fits"] else "no",
            f"{fast['generate_per_second']:.1f}" if fast else "?", _duration(row["fix_seconds"]),
            _parameters(row), "recommended" if row["name"] == choice.name else "",
        )  # fmt: skip
    out.print(catalogue_table)
    if measured is not None:
        out.print(
            f"Speeds: {measured.model} measured here ({measured.prompt_per_second:.0f} tokens/s read, "
            f"{measured.generate_per_second:.1f} written, {measured.samples_per_second:.1f} over the fix's parallel "
            "samples), the others predicted from it (a mixture of experts by its active parameters, its memory by all "
            f"of them); a fix: a typical one's model time ({speed.FIX_PROMPT:,} tokens read, {speed.FIX_SAMPLES} "
            f"samples of {speed.FIX_SAMPLE_TOKENS}).",
            style="dim",
        )
    out.print(Text(printable(f"\nRecommended: {choice.name}, {why}.")))
    if choice.name != in_use and not choice.bundled:
        out.print(f"Get it: cortana models pull {choice.name} && cortana models use {choice.name}", markup=False)
    _print_roles(out, roles)
    for engine, (names, used) in engines.items():
        shown = ", ".join(f"{name} (in use)" if name == used else name for name in names) or "(no models)"
        out.print(Text(printable(f"\n{engine}: {shown}")), soft_wrap=True)
    return 0


def _print_roles(out: Console, roles: dict[str, speed.RoleChoice]) -> None:
    """A model per role (``models:`` in cortana.yml), why each, and the lines that say so."""
    out.print('\nBy role (docs/engines.md, "A model per role"):')
    for role, found in roles.items():
        out.print(Text(printable(f"  {role:<9} {found.model or '-':<20} {found.why}")), soft_wrap=True)
    chosen = {role: found.model for role, found in roles.items() if found.model}
    if roles["sampler"].model == roles["main"].model:
        chosen.pop("sampler", None)  # the turn's model writes the samples anyway
    lines = "".join(f"\n  {role}: {name}" for role, name in chosen.items())
    escalate = "" if "escalate" in chosen else "\n  escalate: off"
    out.print(Text(f"In cortana.yml:\nmodels:{lines}{escalate}", style="dim"))


SOURCES = {"bundled": "bundled", "hf": "hf cache", "ollama": "ollama", "lmstudio": "lmstudio"}
"""Where an installed model's file is, as the listing says it."""


def _installed(window: int, memory: MachineMemory) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """Bundled models whose packages are installed, then every GGUF on this disk (the Hugging Face cache, Ollama's
    store, LM Studio's folder), each with what its header says and whether it fits here; the files on disk that
    do not run, with why; and the stores that could not be read."""
    rows = []
    for name in installed_models():
        path = ensure_model_file(name)
        try:
            rows.append(_installed_row(name, "bundled", path, read_gguf(path), (), memory, window))
        except GGUFError as error:
            print(f"cortana: {error}", file=sys.stderr)
    found, unreadable = catalogue.on_disk()
    not_runnable = []
    for model in found:
        if model.runs and model.info is not None:
            rows.append(_installed_row(model.name, model.source, model.path, model.info, model.notes, memory, window))
        else:
            not_runnable.append(
                {"name": model.name, "source": model.source, "path": str(model.path), "why": model.problem}
            )
    return rows, not_runnable, unreadable


def _installed_row(
    name: str, source: str, path: Path, info: GGUFInfo, notes: tuple[str, ...], memory: MachineMemory, window: int
) -> dict[str, Any]:
    need = memory_estimate(info, window).total
    room = int(memory.total * (1 - catalogue.HEADROOM))
    return {
        "name": name,
        "bundled": source == "bundled",
        "source": source,
        "path": str(path),
        "size": info.size,
        "quantization": info.quantization,
        "context_length": info.context_length,
        "needs": need,
        "fits": need <= room,
        "fits_window": None if need <= room else catalogue.window_that_fits(info, room),
        "notes": list(notes),
    }


def _speeds(measured: Speed | None) -> dict[str, Speed]:
    """Each catalogue model's speed here: the measured one's, and the others' predicted from it."""
    if measured is None:
        return {}
    found = {model.name: speed.speed_of(model, measured) for model in CATALOGUE.values()}
    return {name: value for name, value in found.items() if value is not None}


def _fix_time(speeds: dict[str, Speed]) -> Callable[[catalogue.CatalogueModel], float | None]:
    def seconds(model: catalogue.CatalogueModel) -> float | None:
        known = speeds.get(model.name)
        return speed.fix_seconds(known) if known is not None else None

    return seconds


def _parameters(row: dict[str, Any]) -> str:
    """``7B``, or for a mixture of experts ``30.5B, 3.3B active``."""
    total, active = row["parameters"], row["active_parameters"]
    if not total:
        return "?"
    return f"{total:g}B, {active:g}B active" if active != total else f"{total:g}B"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _catalogue_row(
    model: catalogue.CatalogueModel, memory: MachineMemory, window: int, need: int | None, fast: Speed | None = None
) -> dict[str, Any]:
    need = need or memory_estimate(model, window).total
    return {
        "speed": asdict(fast) if fast is not None else None,
        "fix_seconds": round(speed.fix_seconds(fast), 1) if fast is not None else None,
        "name": model.name,
        "title": model.title,
        "bundled": model.bundled,
        "size": model.size,
        "needs": need,
        "fits": need <= memory.total * (1 - catalogue.HEADROOM),
        "family": model.family,
        "parameters": model.total_billions,
        "active_parameters": model.active_billions,
        "license": model.license or None,
        "notes": model.notes,
    }
