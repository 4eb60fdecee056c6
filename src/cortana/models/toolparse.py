"""Recover tool calls that small models write as text instead of structured calls.

Measured on llama.cpp with ``--jinja``: Qwen2.5-Coder 0.5B/1.5B answer a tool
request with a ```json fenced block or bare JSON in the message content, and
the server returns no ``tool_calls``. Other models write ``<tool_call>`` tags,
several calls in one block, ``<function=name>{...}</function>`` (or, as Qwen3-Coder does, with
``<parameter=key>value</parameter>`` elements for arguments), a
``<function name="..." arguments='{...}'/>`` element (the 1.5B, wrapped in
``<tools>`` like the tool list it was shown) or ``name(arg=value)``. Every adapter passes its answer through
:func:`recover_tool_calls` (and, while streaming, :class:`TextToolCallFilter`),
so the loop sees ordinary :class:`ToolCall` s whatever the model wrote.

Calls of tools the agent offered are recovered in every shape above; a call
naming another tool only in the strict ``{"name": ..., "arguments": {...}}``
shape (it becomes an unknown-tool error the model reads, instead of JSON shown
to the user as its answer). Prose that merely contains JSON stays text. JSON
that small models get wrong (comments, trailing commas, single quotes, doubled
braces) is fixed with ``json_repair``; values are not
coerced here: the tool's pydantic validation does that losslessly, and
arguments that still do not validate reach the model as a tool error.
"""

from __future__ import annotations

import ast
import html
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cortana.messages import ToolCall
from cortana.models.base import ToolSpec, loose_name

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "TextToolCallFilter",
    "load_json",
    "make_tool_call",
    "new_call_id",
    "recover_tool_calls",
]

MAX_ARGUMENT_DEPTH = 32
"""How deeply a call's arguments may nest; deeper ones are an error the model reads, never a crash."""

# <tools> is the wrapper of the tool list in Qwen's template; the 1.5B model sometimes echoes it around a call.
# A block's body never holds another opening tag of its kind: "<tool_call> prose <tool_call>{call}</tool_call>"
# is prose and one call, as the streaming filter sees it, not one broken block.
_TAG = re.compile(r"<(tool_call|tools)>\s*((?:(?!<\1>).)*?)\s*(?:</\1>|\Z)", re.S)
_FUNCTION_TAG = re.compile(r"<function=([\w.\-]+)>\s*(.*?)\s*(?:</function>|\Z)", re.S)
# The 1.5B model also writes a call as an element like those of a tool list, in <tools> or alone:
# <function name="grep_files" arguments='{"pattern": "to_kelvin"}'/> (or its arguments as the element's body).
_FUNCTION_ELEMENT = re.compile(
    r"""<function\s+name\s*=\s*(["'])([\w.\-]+)\1"""
    r"""(?:\s+(?:arguments|parameters|args)\s*=\s*(?:'([^']*)'|"([^"]*)"))?"""
    r"""\s*(?:/>|>\s*(.*?)\s*</function>)""",
    re.S,
)
# Qwen3-Coder writes each argument as <parameter=KEY>\nvalue\n</parameter> inside <function=NAME> ... </function>.
_PARAMETER = re.compile(r"<parameter=([\w.\-]+)>\n?(.*?)\n?</parameter>", re.S)
_FENCE = re.compile(r"```[ \t]*([\w\-]*)[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.S)
# Not "python": a python block with a call in it is more often an example than a call.
_FENCE_LANGUAGES = {"", "json", "json5", "jsonc", "tool_call", "tool_code", "tool"}
_NAME_KEYS = ("name", "tool", "tool_name", "function_name")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input", "params")


def new_call_id() -> str:
    """A fresh tool-call id."""
    return f"call_{uuid.uuid4().hex[:12]}"


def recover_tool_calls(text: str, tools: Sequence[ToolSpec]) -> tuple[str, list[ToolCall]]:
    """Find tool calls written as text.

    Returns:
        ``(remaining_text, calls)``: the text with the recovered calls cut out
        (stripped), and the calls in the order written. With no offered tools,
        or nothing that names one, returns ``(text, [])`` unchanged.
    """
    if not tools or not text.strip():
        return text, []
    names = {loose_name(t.name): t for t in tools}
    calls: list[ToolCall] = []
    cut: list[tuple[int, int]] = []

    patterns = (
        (_TAG, _parse_block),
        (_FUNCTION_TAG, _parse_function_tag),
        (_FUNCTION_ELEMENT, _parse_function_element),
        (_FENCE, _parse_fence),
    )
    for pattern, parse in patterns:
        for match in pattern.finditer(text):
            if any(start < match.end() and match.start() < end for start, end in cut):
                continue
            found = parse(match, names)
            if found:
                calls.extend(found)
                cut.append(match.span())
    if not calls:
        stripped = text.lstrip()
        offset = len(text) - len(stripped)
        found, consumed = _parse_leading(stripped, names)
        if found:
            calls.extend(found)
            cut.append((offset, offset + consumed))
    if not calls:
        return text, []
    calls = _distinct(calls)
    cut.sort()
    remaining, position = [], 0
    for start, end in cut:
        remaining.append(text[position:start])
        position = end
    remaining.append(text[position:])
    return "".join(remaining).strip(), calls


def _distinct(calls: list[ToolCall]) -> list[ToolCall]:
    """Drop exact repeats: a small model stuck in a loop writes the same call many times in one answer."""
    seen: set[str] = set()
    distinct = []
    for call in calls:
        key = f"{call.name}:{json.dumps(call.arguments, sort_keys=True, default=str)}:{call.raw_arguments}"
        if key not in seen:
            seen.add(key)
            distinct.append(call)
    return distinct


def _parse_block(match: re.Match[str], names: dict[str, ToolSpec]) -> list[ToolCall]:
    """The inside of ``<tool_call>`` tags: one or more JSON calls, ``name(...)``, or ``<function name=...>``
    elements."""
    body = match.group(2)
    found, consumed = _parse_leading(body, names)
    if found and not body[consumed:].strip():
        return found
    tag = _FUNCTION_TAG.fullmatch(body.strip())
    if tag is not None:  # Qwen3-Coder: <tool_call><function=name><parameter=...>...</function></tool_call>
        return _parse_function_tag(tag, names)
    elements = list(_FUNCTION_ELEMENT.finditer(body))
    if not elements or _FUNCTION_ELEMENT.sub("", body).strip():
        return []  # prose, or something besides calls, in the block
    calls = [_parse_function_element(element, names) for element in elements]
    return [call for found in calls for call in found] if all(calls) else []


def _parse_function_tag(match: re.Match[str], names: dict[str, ToolSpec]) -> list[ToolCall]:
    """Llama 3.1 style ``<function=name>{"arg": ...}</function>``, or Qwen3-Coder's, whose arguments are
    ``<parameter=KEY>`` elements."""
    spec = names.get(loose_name(match.group(1)))
    if spec is None:
        return []
    body = match.group(2)
    parameters = _xml_parameters(body, spec) if "<parameter=" in body else None
    if parameters is not None:
        return [_make_call(spec, parameters, body)]
    arguments = load_json(body) if body.strip() else {}
    return [_make_call(spec, arguments, body)]


def _xml_parameters(body: str, spec: ToolSpec) -> dict[str, Any] | None:
    """Qwen3-Coder's ``<parameter=KEY>\nvalue\n</parameter>`` elements as arguments (``None`` when the body holds
    anything else): a string parameter's value is its text as written, any other's is JSON where it parses (a number,
    a list), as llama.cpp's own parser of the format reads them."""
    elements = list(_PARAMETER.finditer(body))
    if not elements or _PARAMETER.sub("", body).strip():
        return None
    properties = spec.parameters.get("properties") if isinstance(spec.parameters, dict) else None
    properties = properties if isinstance(properties, dict) else {}
    arguments: dict[str, Any] = {}
    for element in elements:
        key, text = element.group(1), element.group(2)
        schema = properties.get(key)
        if isinstance(schema, dict) and schema.get("type") == "string":
            arguments[key] = text
            continue
        value = load_json(text)
        arguments[key] = text if value is _INVALID else value
    return arguments


def _parse_function_element(match: re.Match[str], names: dict[str, ToolSpec]) -> list[ToolCall]:
    """``<function name="grep_files" arguments='{...}'/>``, its arguments an attribute (a double-quoted one
    HTML-escaped) or the element's body; none: no arguments."""
    spec = names.get(loose_name(match.group(2)))
    if spec is None:
        return []
    single, double, body = match.group(3), match.group(4), match.group(5)
    raw = single if single is not None else html.unescape(double) if double is not None else body or ""
    arguments = load_json(raw) if raw.strip() else {}
    return [_make_call(spec, arguments, raw)]


def _parse_fence(match: re.Match[str], names: dict[str, ToolSpec]) -> list[ToolCall]:
    """A fenced block whose whole content is tool calls."""
    if match.group(1).lower() not in _FENCE_LANGUAGES:
        return []
    body = match.group(2)
    found, consumed = _parse_leading(body, names)
    return found if found and not body[consumed:].strip() else []


def _parse_leading(text: str, names: dict[str, ToolSpec]) -> tuple[list[ToolCall], int]:
    """Calls at the very start of ``text`` and how many characters they use.

    Accepts a JSON object, several objects one after another, a JSON list, or
    Python-style ``name(arg=value)`` calls (also in a list). Anything that is
    not entirely calls of offered tools gives ``([], 0)``.
    """
    stripped = text.lstrip()
    lead = len(text) - len(stripped)
    if stripped.startswith(("{", "[")):
        values: list[Any] = []
        position = 0
        while True:
            rest = stripped[position:]
            skipped = len(rest) - len(rest.lstrip(" \t\r\n,;"))
            rest = rest[skipped:]
            if not rest.startswith(("{", "[")):
                break
            end, closed = _json_extent(rest)
            if not closed and values:
                position += skipped + end  # a last call cut off mid-way (max_tokens): drop it
                break
            value = load_json(rest[:end])
            if value is _INVALID:
                break
            values.extend(value if isinstance(value, list) else [value])
            position += skipped + end
        calls = [_as_call(value, names) for value in values]
        if values and all(calls):
            return [c for c in calls if c is not None], lead + position
    return _parse_python_calls(stripped, names, lead)


def _parse_python_calls(text: str, names: dict[str, ToolSpec], lead: int) -> tuple[list[ToolCall], int]:
    """``name(a=1)`` or ``[f(a=1), g(b=2)]`` on the first line(s), for offered names only."""
    first = re.match(r"\[?\s*([A-Za-z_][\w.\-]*)\s*\(", text)
    if not first or loose_name(first.group(1)) not in names:
        return [], 0
    end, _ = _balanced_extent(text)
    source = text[:end]
    try:
        tree = ast.parse(source.replace("-", "_") if "-" in first.group(1) else source, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: a NUL byte in the text
        return [], 0
    nodes = tree.elts if isinstance(tree, ast.List) else [tree]
    calls = []
    for node in nodes:
        if not isinstance(node, ast.Call):
            return [], 0
        spec = names.get(loose_name(ast.unparse(node.func)))
        if spec is None:
            return [], 0
        try:
            arguments = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
            positional = [ast.literal_eval(arg) for arg in node.args]
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            return [], 0
        arguments.update(zip(spec.parameters.get("properties", {}), positional, strict=False))
        calls.append(_make_call(spec, arguments, None))
    return calls, lead + end


_INVALID = object()


def load_json(text: str) -> Any:
    """Parse JSON, repairing what small models get wrong; ``_INVALID`` when it is not JSON at all (or too deep)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    except RecursionError:
        return _INVALID
    candidate = text.strip()
    while candidate.startswith("{{") and candidate.endswith("}}"):
        candidate = candidate[1:-1]  # {{"name": ...}} from templates that show doubled braces
        try:
            return json.loads(candidate)
        except ValueError:
            continue
        except RecursionError:
            return _INVALID
    import json_repair  # ~30 ms to import, needed only for the broken JSON a model sometimes writes

    try:
        repaired = json_repair.loads(candidate)
    except Exception:  # RecursionError, ValueError, and its own assertions on some broken input: not JSON
        return _INVALID
    return _INVALID if repaired in ("", None) else repaired


def _balanced_extent(text: str) -> tuple[int, bool]:
    """(length, closed) of the bracket-balanced span at the start of ``text``, quotes of both kinds respected.

    ``{...}``, ``[...]`` and ``name(...)`` all end where their first bracket closes.
    """
    depth, quote, escaped = 0, "", False
    for index, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index + 1, True
    return len(text), False


def _json_extent(text: str) -> tuple[int, bool]:
    """Like :func:`_balanced_extent`, taking in the extra closing braces of a ``{{...}}}`` value."""
    end, closed = _balanced_extent(text)
    if closed and text.startswith("{{"):
        while text[end : end + 1] == "}":
            end += 1
    return end, closed


def _as_call(value: Any, names: dict[str, ToolSpec]) -> ToolCall | None:
    """A ``ToolCall`` if ``value`` is a call, in any of the shapes models use.

    A call of an offered tool may take any of those shapes. A call naming a tool that was not
    offered is recovered only in the strict shape ``{"name": "x", "arguments": {...}}``: it
    becomes a call the loop answers with an unknown-tool error the model can correct, where it
    would otherwise reach the user as an answer made of JSON.
    """
    if not isinstance(value, dict):
        return None
    function = value.get("function")
    if isinstance(function, dict):  # OpenAI shape: {"type": "function", "function": {...}}
        return _as_call(function, names)
    name = next((value[k] for k in _NAME_KEYS if isinstance(value.get(k), str)), None)
    if name is None and isinstance(function, str):
        name = function
    spec = names.get(loose_name(name)) if name else None
    if spec is None:
        return _unknown_call(value)
    raw = next((value[k] for k in _ARGUMENT_KEYS if k in value), None)
    if raw is None:  # {"name": "get_weather", "city": "Paris"}: arguments written inline
        skip = {*_NAME_KEYS, "function", "type", "id"}
        raw = {k: v for k, v in value.items() if k not in skip}
    return _make_call(spec, raw, raw if isinstance(raw, str) else None)


_IDENTIFIER = re.compile(r"^[A-Za-z_][\w.\-]{0,63}$")


def _unknown_call(value: dict[str, Any]) -> ToolCall | None:
    """``{"name": "slugify", "arguments": {...}}`` naming no offered tool: a call of that name (it will fail)."""
    if set(value) - {"name", "arguments", "type", "id"} or not isinstance(value.get("arguments"), dict):
        return None
    name = value.get("name")
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        return None
    return make_tool_call(new_call_id(), name, value["arguments"], None, from_text=True)


def _make_call(spec: ToolSpec, arguments: Any, raw_text: str | None) -> ToolCall:
    return make_tool_call(new_call_id(), spec.name, arguments, raw_text, from_text=True)


def make_tool_call(call_id: str, name: str, arguments: Any, raw_text: str | None, *, from_text: bool) -> ToolCall:
    """A ``ToolCall`` from arguments as a model gave them: a JSON object, its text, or something unusable.

    Arguments that are not an object, or nest deeper than ``MAX_ARGUMENT_DEPTH``, keep
    their text in ``raw_arguments``: the loop answers the call with an error the model can correct.
    """
    if isinstance(arguments, str):
        raw_text = arguments if raw_text is None else raw_text
        parsed = load_json(arguments) if arguments.strip() else {}
        arguments = parsed if isinstance(parsed, dict) else None
    if isinstance(arguments, dict) and _depth(arguments, MAX_ARGUMENT_DEPTH) <= MAX_ARGUMENT_DEPTH:
        return ToolCall(id=call_id, name=name, arguments=arguments, from_text=from_text)
    if isinstance(arguments, dict):
        raw = f"(arguments nested deeper than {MAX_ARGUMENT_DEPTH} levels)"
    else:
        raw = raw_text if raw_text is not None else str(arguments)[:2000]
    return ToolCall(id=call_id, name=name, raw_arguments=raw, from_text=from_text)


def _depth(value: Any, limit: int) -> int:
    """How deeply ``value`` nests (lists and objects), counted without recursion; stops past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if level > limit:
                return level
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


@dataclass
class _Hold:
    start: int
    closer: str | None  # the text that ends the held block; None: hold to the end of the answer


class TextToolCallFilter:
    """Decides, while an answer streams, which text deltas are safe to show.

    Text that may turn out to be a tool call (an answer that starts with
    ``{``, ``[``, a fence, a tag or ``offered_tool(``; a fence or tag at a line
    start later on) is held back until it can be decided, so a user never
    sees a tool call flash by as text. :func:`recover_tool_calls` on the whole
    answer stays the authority for what the calls are.
    """

    def __init__(self, tools: Sequence[ToolSpec]) -> None:
        self._tools = list(tools)
        self._names = [loose_name(t.name) for t in tools]
        self._text = ""
        self._emitted = 0
        self._hold: _Hold | None = None
        self.enabled = bool(tools)

    def feed(self, delta: str) -> str:
        """Add a delta; return the text that may be shown now."""
        self._text += delta
        if not self.enabled:
            self._emitted = len(self._text)
            return delta
        out = []
        while True:
            if self._hold is not None:
                if self._hold.closer is None:
                    break
                close = self._text.find(self._hold.closer, self._hold.start + 3)
                if close < 0:
                    break
                end = close + len(self._hold.closer)
                block = self._text[self._hold.start : end]
                remaining, calls = recover_tool_calls(block, self._tools)
                out.append(block if not calls else remaining)
                self._emitted = end
                self._hold = None
                continue
            start, closer, decided = self._find_trigger()
            if start is None:
                out.append(self._text[self._emitted :])
                self._emitted = len(self._text)
                break
            out.append(self._text[self._emitted : start])
            self._emitted = start
            if not decided:
                break  # could still become a trigger: wait for more text
            self._hold = _Hold(start, closer)
        return "".join(out)

    def flush(self) -> str:
        """The answer ended: return what is left to show of the held text (calls cut out)."""
        pending = self._text[self._emitted :]
        self._emitted = len(self._text)
        self._hold = None
        if not pending:
            return ""
        remaining, calls = recover_tool_calls(pending, self._tools)
        return remaining if calls else pending

    def _find_trigger(self) -> tuple[int | None, str | None, bool]:
        """The first place from ``_emitted`` where a call may start: (index, closer, decided)."""
        at_start = not self._text[: self._emitted].strip()
        index = self._emitted
        while index <= len(self._text):
            line_end = self._text.find("\n", index)
            line = self._text[index:] if line_end < 0 else self._text[index:line_end]
            body = line.lstrip()
            first_line = at_start and not self._text[self._emitted : index].strip()
            result = self._classify(body, complete=line_end >= 0, first=first_line)
            if result is not None:
                kind, closer = result
                if kind == "wait":
                    return index, None, False
                return index, closer, True
            if line_end < 0:
                return None, None, True
            index = line_end + 1
        return None, None, True

    def _classify(self, body: str, *, complete: bool, first: bool) -> tuple[str, str | None] | None:
        """("hold", closer) if ``body`` starts a possible call, ("wait", None) if it may, else None."""
        if not body:
            return None if complete else ("wait", None) if first else None
        if body.startswith("```"):
            if not complete:
                return "wait", None
            language = body[3:].strip().lower()
            return ("hold", "```") if language in _FENCE_LANGUAGES else None
        tags = (("<tool_call>", "</tool_call>"), ("<tools>", "</tools>"), ("<function=", "</function>"))
        for tag, closer in (*tags, ("<function name", None)):  # an element ends "/>" or "</function>": to the end
            if body.startswith(tag):
                return "hold", closer
            if tag.startswith(body):
                return "wait", None
        if "```".startswith(body):
            return "wait", None
        if first:
            if body[0] in "{[":
                return "hold", None
            word = re.match(r"[\w.\-]*", body).group(0)  # type: ignore[union-attr]
            rest = body[len(word) :]
            if word and loose_name(word) in self._names and (not rest or rest.lstrip().startswith("(")):
                return ("hold", None) if rest else ("wait", None)
            if word and not rest and any(name.startswith(loose_name(word)) for name in self._names):
                return "wait", None
        return None
