"""GBNF grammars that let a model write only calls of the offered tools.

llama.cpp can constrain generation with a grammar in its GBNF notation. This
module turns the offered tools' JSON schemas into one: a call names an
offered tool, and its arguments are a JSON object that matches that tool's
schema (types, enums, ``const``, required keys, nested objects and arrays,
``anyOf``, local ``$ref``). The grammar is written for the Hermes/Qwen call
format the chat template teaches::

    <tool_call>
    {"name": "weather", "arguments": {"city": "Lisbon"}}
    </tool_call>

:func:`call_grammar` constrains what follows a *prefilled* start of the first
call (the prompt already ends in ``<tool_call>\\n{"name": "weather",
"arguments": ``), then permits up to ``max_calls - 1`` further calls of any
offered tool. :func:`choice_grammar` constrains a one-word choice among names.

Keys are written in schema order, required ones first; optional keys may be
left out. Whitespace is compact (one optional space), so a small model cannot
pad its way to the token limit. Schema keywords with no GBNF equivalent
(``pattern``, ``format``, numeric bounds, string lengths) are not enforced:
the tool's own validation still checks every call, and its errors reach the
model as tool errors it can correct.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from cortana.models.base import ToolSpec

__all__ = ["CALL_CLOSE", "CALL_OPEN", "call_grammar", "call_prefix", "choice_grammar", "gbnf_literal"]

CALL_OPEN = "<tool_call>\n"
CALL_CLOSE = "\n</tool_call>"
# No space after the colon: a prompt that ends in a space splits the model's usual " {" token, and
# small models then write nonsense (a 0.5B model turned "Lisbon" into "Lyon"). The grammar adds it.
_ARGUMENTS_KEY = ', "arguments":'

_PRIMITIVES = r"""
sp ::= " "?
string ::= "\"" char* "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])
integer ::= "-"? ("0" | [1-9] [0-9]{0,17})
number ::= integer ("." [0-9]{1,17})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" sp (string ":" sp value ("," sp string ":" sp value)*)? sp "}"
array ::= "[" sp (value ("," sp value)*)? sp "]"
""".strip()

_TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean", "null": "null"}
_MAX_DEPTH = 24


def gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return '"' + escaped.replace("\t", "\\t") + '"'


def call_prefix(name: str) -> str:
    """The start of a call of ``name``, up to where its arguments begin (prefilled into the prompt)."""
    return CALL_OPEN + '{"name": ' + json.dumps(name, ensure_ascii=False) + _ARGUMENTS_KEY


def choice_grammar(options: Sequence[str]) -> str:
    """A grammar whose only sentences are the given options."""
    if not options:
        raise ValueError("choice_grammar needs at least one option")
    return "root ::= " + " | ".join(gbnf_literal(option) for option in options)


def call_grammar(tools: Sequence[ToolSpec], first: str, *, max_calls: int = 1) -> str:
    """The grammar for what follows :func:`call_prefix` ``(first)``.

    The first call's arguments, its end, then up to ``max_calls - 1`` whole
    calls of any tool in ``tools``, each in its own ``<tool_call>`` block.
    """
    by_name = {tool.name: tool for tool in tools}
    if first not in by_name:
        raise ValueError(f"{first!r} is not one of the offered tools")
    builder = _Builder()
    tool_rules = {tool.name: builder.tool_arguments(tool) for tool in tools}
    end = gbnf_literal("}" + CALL_CLOSE)
    lines = [f"root ::= sp {tool_rules[first]} {end}{' more' if max_calls > 1 else ''}"]
    if max_calls > 1:
        calls = " | ".join(
            f"{gbnf_literal(json.dumps(name, ensure_ascii=False) + _ARGUMENTS_KEY)} sp {rule}"
            for name, rule in tool_rules.items()
        )
        lines.append(f"call ::= {calls}")
        opening = gbnf_literal("\n" + CALL_OPEN + '{"name": ')
        lines.append(f"more ::= ({opening} call {end}){{0,{max_calls - 1}}}")
    return "\n".join([*lines, *builder.rules, _PRIMITIVES]) + "\n"


class _Builder:
    """Writes one rule per schema node, named after where it sits."""

    def __init__(self) -> None:
        self.rules: list[str] = []
        self._names: set[str] = set()
        self._refs: dict[str, str] = {}
        self._root: dict[str, Any] = {}

    def tool_arguments(self, tool: ToolSpec) -> str:
        self._root = tool.parameters if isinstance(tool.parameters, dict) else {}
        schema = dict(self._root)
        schema.setdefault("type", "object")
        return self._rule(schema, "args-" + tool.name, 0)

    def _new_name(self, hint: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9]+", "-", hint).strip("-").lower() or "r"
        if base[0].isdigit():
            base = "r-" + base
        name, counter = base, 1
        while name in self._names or name in _RESERVED:
            counter += 1
            name = f"{base}-{counter}"
        self._names.add(name)
        return name

    def _define(self, hint: str, body: str) -> str:
        name = self._new_name(hint)
        self.rules.append(f"{name} ::= {body}")
        return name

    def _rule(self, schema: Any, hint: str, depth: int) -> str:
        """The name of a rule (or a primitive) matching ``schema``."""
        if depth > _MAX_DEPTH or not isinstance(schema, dict) or not schema:
            return "value"
        if "$ref" in schema:
            return self._ref(str(schema["$ref"]), hint, depth)
        if "const" in schema:
            return self._define(hint, gbnf_literal(json.dumps(schema["const"], ensure_ascii=False)))
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            options = " | ".join(gbnf_literal(json.dumps(v, ensure_ascii=False)) for v in schema["enum"])
            return self._define(hint, options)
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                parts = [self._rule(sub, f"{hint}-{i}", depth + 1) for i, sub in enumerate(schema[key])]
                return self._define(hint, " | ".join(dict.fromkeys(parts)))
        if isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
            return self._rule(schema["allOf"][0], hint, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            parts = [self._rule({**schema, "type": k}, f"{hint}-{k}", depth + 1) for k in kind if isinstance(k, str)]
            return self._define(hint, " | ".join(dict.fromkeys(parts))) if parts else "value"
        if kind in _TYPES:
            return _TYPES[kind]
        if kind == "array":
            return self._array(schema, hint, depth)
        if kind == "object" or "properties" in schema:
            return self._object(schema, hint, depth)
        return "value"

    def _ref(self, ref: str, hint: str, depth: int) -> str:
        if ref in self._refs:
            return self._refs[ref]
        target: Any = self._root
        if not ref.startswith("#/"):
            return "value"
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            return "value"
        # Name the rule before writing it, so a schema that refers to itself ends in a cycle, not a loop.
        name = self._new_name("ref-" + ref.rsplit("/", 1)[-1])
        self._refs[ref] = name
        body = self._rule(target, name + "-body", depth + 1)
        self.rules.append(f"{name} ::= {body}")
        return name

    def _array(self, schema: dict[str, Any], hint: str, depth: int) -> str:
        item = self._rule(schema.get("items"), hint + "-item", depth + 1)
        items = f'{item} ("," sp {item})*'
        body = f'"[" sp {items} sp "]"' if (schema.get("minItems") or 0) >= 1 else f'"[" sp ({items})? sp "]"'
        return self._define(hint, body)

    def _object(self, schema: dict[str, Any], hint: str, depth: int) -> str:
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return "object"
        if not properties:  # a tool without arguments, unless it takes any
            return "object" if schema.get("additionalProperties") else self._define(hint, '"{" sp "}"')
        required = [key for key in schema.get("required") or [] if key in properties]
        optional = [key for key in properties if key not in required]
        pairs = {
            key: self._define(
                f"{hint}-{key}-kv",
                f"{gbnf_literal(json.dumps(key, ensure_ascii=False) + ':')} sp "
                f"{self._rule(properties[key], f'{hint}-{key}', depth + 1)}",
            )
            for key in [*required, *optional]
        }
        # Optional keys, in order, any of them left out: tail-i is ("," kv-i)? tail-(i+1).
        tails: list[str] = []
        following = ""
        for key in reversed(optional):
            body = f'("," sp {pairs[key]})?' + (f" {following}" if following else "")
            following = self._define(f"{hint}-after-{key}", body)
            tails.insert(0, following)
        if required:
            head = ' "," sp '.join(pairs[key] for key in required)
            inner = head + (f" {tails[0]}" if tails else "")
            return self._define(hint, f'"{{" sp {inner} sp "}}"')
        starts = [pairs[key] + (f" {tails[i + 1]}" if i + 1 < len(tails) else "") for i, key in enumerate(optional)]
        return self._define(hint, '"{" sp (' + " | ".join(starts) + ')? sp "}"')


_RESERVED = {"root", "sp", "string", "char", "integer", "number", "boolean", "null", "value", "object", "array"}
_RESERVED |= {"call", "more"}
