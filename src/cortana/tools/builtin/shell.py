"""Reading a shell command the way ``/bin/sh`` will: words, operators, redirections, and what is left to expansion.

The gate decides about ``run_command`` from this reading, never from the raw
string: ``.gi''t`` is the word ``.git``, ``cortana.y?l`` is a pattern the
shell expands, ``$D/hooks`` is a word whose value is only known when it runs,
and ``a && b`` is two commands. The lexer follows the POSIX tokenizing rules
(quotes, backslashes, ``$(…)``, ``${…}``, backquotes, here-documents,
comments, operators and IO numbers); whatever it cannot read with certainty
(an unclosed quote, a ``$(`` without its ``)``) makes the whole command
:attr:`ParsedCommand.opaque`, and the gate treats an opaque command as one it
cannot show to be harmless. ``tests/security/test_shell_words.py`` checks the
words against what a real ``sh`` makes of the same commands.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["RESERVED_WORDS", "ParsedCommand", "Redirect", "SimpleCommand", "Word", "parse_command"]

RESERVED_WORDS = frozenset(
    {"!", "{", "}", "case", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in", "select",
     "then", "until", "while", "[[", "]]", "coproc", "time"}
)  # fmt: skip
"""Words that open or close a compound command when they come first."""
_OPERATORS = ("&&", "||", ";;", "|&", ";", "&", "|", "(", ")", "\n")
_REDIRECTS = ("<<<", "<<-", "&>>", "<<", ">>", "<&", ">&", "<>", ">|", "&>", "<", ">")
_BLANK = " \t"
_GLOB = frozenset("*?[")
MAX_COMMAND_CHARS = 100_000
"""A longer command is not read (it is opaque): the reading stays cheap whatever the model writes."""


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word.

    Attributes:
        text: the word after quote removal (``.gi''t`` -> ``.git``); expansions are left as written.
        raw: the word as written.
        quoted: some of it was quoted or escaped.
        expands: it holds a ``$`` expansion, a ``$(…)`` or backquote substitution, or ``<(…)``: its value
            is only known when the command runs.
        glob: it holds an unquoted ``*``, ``?`` or ``[``: the shell may replace it with matching file names.
        brace: it holds an unquoted ``{…,…}`` or ``{a..b}`` (bash expands these into several words).
        tilde: it starts with an unquoted ``~`` (a home folder).
    """

    text: str
    raw: str
    quoted: bool = False
    expands: bool = False
    glob: bool = False
    brace: bool = False
    tilde: bool = False

    @property
    def literal(self) -> bool:
        """Whether the shell uses the word exactly as :attr:`text` (nothing left to expand)."""
        return not (self.expands or self.glob or self.brace or self.tilde)


@dataclass(frozen=True, slots=True)
class Redirect:
    """A redirection: its operator (``>``, ``2>>``, ``<<``…) and its target word (a file, an fd, a delimiter)."""

    operator: str
    target: Word | None

    @property
    def writes(self) -> bool:
        """Whether it opens its target for writing."""
        op = self.operator.lstrip("0123456789")
        return op in (">", ">>", ">|", "<>", "&>", "&>>") or (op == ">&" and not _is_fd(self.target))

    @property
    def harmless(self) -> bool:
        """An fd duplicated or closed (``2>&1``, ``>&-``), or output thrown away (``>/dev/null``)."""
        op = self.operator.lstrip("0123456789")
        if op in (">&", "<&") and _is_fd(self.target):
            return True
        target = self.target
        return op in (">", ">>", "&>", "2>") and target is not None and target.literal and target.text == "/dev/null"


def _is_fd(word: Word | None) -> bool:
    return word is not None and word.literal and (word.text.isdigit() or word.text == "-")


@dataclass(slots=True)
class SimpleCommand:
    """One command of a list or pipeline: its assignments (``A=1``), words and redirections, in order."""

    assignments: list[Word] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        """The words after quote removal."""
        return [word.text for word in self.words]


@dataclass(slots=True)
class ParsedCommand:
    """A command line read as the shell reads it.

    Attributes:
        commands: the simple commands, in order.
        separators: what joins each to the next (``&&``, ``||``, ``;``, ``|``, ``&``, newline).
        compound: it has a subshell, a group, a control structure (``if``, ``for``…), a function or
            a here-document: its parts are listed, but it is more than a list of commands.
        opaque: it could not be read with certainty (an unclosed quote or substitution, or too long).
    """

    commands: list[SimpleCommand] = field(default_factory=list)
    separators: list[str] = field(default_factory=list)
    compound: bool = False
    opaque: bool = False

    def words(self) -> list[Word]:
        """Every word of every command, redirection targets and assignments included."""
        found: list[Word] = []
        for command in self.commands:
            found += command.assignments + command.words
            found += [redirect.target for redirect in command.redirects if redirect.target is not None]
        return found


class _Unreadable(Exception):
    """The command cannot be read with certainty."""


def parse_command(command: str) -> ParsedCommand:
    """``command`` read as ``sh -c`` reads it (see the module docstring); never raises."""
    if len(command) > MAX_COMMAND_CHARS or "\x00" in command:
        return ParsedCommand(opaque=True)
    try:
        return _Parser(command).parse()
    except _Unreadable:
        return ParsedCommand(opaque=True)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.result = ParsedCommand()
        self.current = SimpleCommand()
        self.heredocs: list[tuple[Redirect, bool]] = []  # here-documents whose bodies follow the next newline

    def parse(self) -> ParsedCommand:
        text = self.text
        while self.at < len(text):
            char = text[self.at]
            if char in _BLANK:
                self.at += 1
            elif char == "\\" and text.startswith("\\\n", self.at):
                self.at += 2  # a line continuation between words
            elif char == "#":
                end = text.find("\n", self.at)
                self.at = len(text) if end < 0 else end
            elif redirect := self._redirect_operator():
                self._read_redirect(redirect)
            elif operator := next((op for op in _OPERATORS if text.startswith(op, self.at)), None):
                self.at += len(operator)
                self._end_command(operator)
                if operator == "\n" and self.heredocs:
                    self._skip_heredoc_bodies()
            else:
                self._add_word(self._read_word())
        if self.heredocs:
            raise _Unreadable  # a here-document without its body
        self._end_command(None)
        return self.result

    # -- commands --------------------------------------------------------------------------

    def _add_word(self, word: Word) -> None:
        command = self.current
        if not command.words and _is_assignment(word):
            command.assignments.append(word)
            return
        if not command.words and not word.quoted and word.text in RESERVED_WORDS:
            self.result.compound = True
        if command.words and word.text == "()":
            self.result.compound = True  # name() { …; }: a function definition
        command.words.append(word)

    def _end_command(self, separator: str | None) -> None:
        command = self.current
        if separator in ("(", ")", ";;"):
            self.result.compound = True
        if command.words or command.assignments or command.redirects:
            self.result.commands.append(command)
            if separator is not None and separator not in ("(", ")"):
                self.result.separators.append(separator)
        elif separator in ("&&", "||", "|", "|&", "&") and self.result.commands:
            # `a && && b` is a syntax error in sh; `( a ) && b` is a compound
            self.result.compound = True
        self.current = SimpleCommand()

    def _redirect_operator(self) -> str | None:
        text, at = self.text, self.at
        digits = at
        while digits < len(text) and text[digits].isdigit():
            digits += 1
        if digits > at and (digits >= len(text) or text[digits] not in "<>"):
            return None  # a word of digits, not an IO number
        if text.startswith(("<(", ">("), digits):
            return None  # process substitution: read as a word
        operator = next((op for op in _REDIRECTS if text.startswith(op, digits)), None)
        return None if operator is None else text[at:digits] + operator

    def _read_redirect(self, operator: str) -> None:
        self.at += len(operator)
        while self.at < len(self.text) and self.text[self.at] in _BLANK:
            self.at += 1
        if self.at >= len(self.text) or self.text[self.at] in "\n;&|()<>":
            raise _Unreadable  # a redirection without its target
        target = self._read_word()
        redirect = Redirect(operator, target)
        base = operator.lstrip("0123456789")
        if base in ("<<", "<<-"):
            self.heredocs.append((redirect, base == "<<-"))
            self.result.compound = True
        self.current.redirects.append(redirect)

    def _skip_heredoc_bodies(self) -> None:
        """Skip the bodies of the here-documents opened on the line just ended: they are data, not commands.

        The body of one whose delimiter is unquoted is expanded (``$(…)`` in it runs): when it holds
        a ``$``, a backquote or a backslash, its target word is marked as expanding.
        """
        lines = self.text[self.at :].split("\n")
        consumed = 0
        for redirect, strip_tabs in self.heredocs:
            delimiter = redirect.target.text if redirect.target is not None else ""
            body: list[str] = []
            while True:
                if consumed >= len(lines):
                    raise _Unreadable
                line = lines[consumed]
                consumed += 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                body.append(line)
            target = redirect.target
            if target is not None and not target.quoted and any(c in line for line in body for c in "$`\\"):
                marked = Redirect(redirect.operator, Word(target.text, target.raw, expands=True))
                for command in (self.current, *self.result.commands):
                    command.redirects[:] = [marked if r is redirect else r for r in command.redirects]
        self.heredocs.clear()
        self.at += sum(len(line) + 1 for line in lines[:consumed])

    # -- words -----------------------------------------------------------------------------

    def _read_word(self) -> Word:
        text = self.text
        start = self.at
        out: list[str] = []
        quoted = expands = glob = brace = False
        tilde = text[start] == "~"
        while self.at < len(text):
            char = text[self.at]
            if char in _BLANK or char == "\n" or char in ";&|()" or (char in "<>" and not self._starts_substitution()):
                break
            if char == "\\":
                if self.at + 1 >= len(text):  # a backslash at the very end stands for itself
                    out.append(char)
                    quoted = True
                    self.at += 1
                    continue
                if text[self.at + 1] != "\n":  # a backslash-newline is removed
                    out.append(text[self.at + 1])
                    quoted = True
                self.at += 2
            elif char == "'":
                end = text.find("'", self.at + 1)
                if end < 0:
                    raise _Unreadable
                out.append(text[self.at + 1 : end])
                quoted = True
                self.at = end + 1
            elif char == '"':
                inner, inner_expands = self._double_quoted()
                out.append(inner)
                quoted = True
                expands = expands or inner_expands
            elif char == "`" or (char == "$" and self._expansion_at(self.at)):
                out.append(self._substitution())
                expands = True
            elif char in "<>":  # <( or >(: process substitution
                self.at += 1
                out.append(char + self._substitution())
                expands = True
            else:
                if char in _GLOB:
                    glob = True
                elif char == "{":
                    brace = brace or self._brace_expansion(self.at)
                out.append(char)
                self.at += 1
        raw = text[start : self.at]
        return Word("".join(out), raw, quoted=quoted, expands=expands, glob=glob, brace=brace, tilde=tilde)

    def _starts_substitution(self) -> bool:
        return self.text.startswith(("<(", ">("), self.at)

    def _double_quoted(self) -> tuple[str, bool]:
        """A double-quoted string from its opening quote: its text, and whether it holds an expansion."""
        text = self.text
        self.at += 1
        out: list[str] = []
        expands = False
        while True:
            if self.at >= len(text):
                raise _Unreadable
            char = text[self.at]
            if char == '"':
                self.at += 1
                return "".join(out), expands
            if char == "\\" and self.at + 1 < len(text) and text[self.at + 1] in '$`"\\\n':
                if text[self.at + 1] != "\n":
                    out.append(text[self.at + 1])
                self.at += 2
            elif char == "`" or (char == "$" and self._expansion_at(self.at)):
                out.append(self._substitution())
                expands = True
            else:
                out.append(char)
                self.at += 1

    def _expansion_at(self, at: int) -> bool:
        """Whether the ``$`` at ``at`` starts an expansion (``$x``, ``${``, ``$(``, ``$?``…), not a plain ``$``."""
        following = self.text[at + 1 : at + 2]
        return bool(following) and (following in "({'@*#?-$!_" or following.isalnum())

    def _substitution(self) -> str:
        """Skip one ``$…`` or backquote expansion (balanced); its text as written."""
        text, start = self.text, self.at
        if text[start] == "`":
            self.at += 1
            while self.at < len(text) and text[self.at] != "`":
                self.at += 2 if text[self.at] == "\\" else 1
            if self.at >= len(text):
                raise _Unreadable
            self.at += 1
            return text[start : self.at]
        if text[start] == "(":  # the "(" of <( or >(
            self._balanced("(", ")")
            return text[start : self.at]
        self.at += 1  # the $
        following = text[self.at]
        if following == "(":
            self._balanced("(", ")")
        elif following == "{":
            self._balanced("{", "}")
        elif following == "'":  # $'…': bash's escapes; sh reads a $ then a quote. Unknowable: opaque.
            raise _Unreadable
        elif following.isalnum() or following == "_":
            while self.at < len(text) and (text[self.at].isalnum() or text[self.at] == "_"):
                self.at += 1
        else:  # one of @*#?-$!
            self.at += 1
        return text[start : self.at]

    def _balanced(self, opening: str, closing: str) -> None:
        """Skip from an ``opening`` bracket to its match, minding quotes and nested substitutions."""
        text = self.text
        depth = 0
        while self.at < len(text):
            char = text[self.at]
            if char == "\\":
                self.at += 2
                continue
            if char == "'" and opening == "(":
                end = text.find("'", self.at + 1)
                if end < 0:
                    raise _Unreadable
                self.at = end + 1
                continue
            if char == '"':
                self._double_quoted()
                continue
            if char == "`":
                self._substitution()
                continue
            if char == opening:
                depth += 1
            elif char == closing:
                depth -= 1
                if depth == 0:
                    self.at += 1
                    return
            self.at += 1
        raise _Unreadable

    def _brace_expansion(self, at: int) -> bool:
        """Whether an unquoted ``{`` at ``at`` starts ``{a,b}`` or ``{1..3}`` (bash expands those)."""
        depth = 0
        for index in range(at, min(len(self.text), at + 4096)):
            char = self.text[index]
            if char in _BLANK or char in "\n;&|<>'\"":
                return False
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    inner = self.text[at + 1 : index]
                    return "," in inner or ".." in inner
        return False


def _is_assignment(word: Word) -> bool:
    name, equals, _ = word.raw.partition("=")
    return bool(equals) and bool(name) and (name[0].isalpha() or name[0] == "_") and name.replace("_", "a").isalnum()
