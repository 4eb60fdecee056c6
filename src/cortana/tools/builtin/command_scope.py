"""What an "always" for a command covers: an argv prefix (program and subcommand), and only for plain commands.

Answering "always" to ``git status --short`` remembers ``git status``: a later
``git status`` with any plain options runs without asking, ``git push`` does
not, and neither does ``git -c core.fsmonitor=… status``. The prefix is the
program and, for programs with subcommands, the subcommand (``python -m
pytest``, ``npm run build``, ``uv run pytest``). A command is *plain* when
nothing in it can run other code or change the program's config:

- no redirection (but ``2>&1`` and ``>/dev/null``), no ``$…``, backquote or
  ``<(…)`` substitution, no assignment before the program, no background
  ``&``, no subshell, group, control structure or here-document;
- a program that is a literal word (no pattern, no variable), and not one
  that runs its arguments as a command or as code (``sh``, ``env``,
  ``xargs``, ``sudo``, ``timeout``, ``awk``, ``sed``…) or talks to the
  network on its own (``curl``, ``ssh``, ``rsync``…);
- none of the program's options that run code or change its config
  (``git -c``/``--config-env``/``--exec-path``/``-C`` and every option before
  git's subcommand, ``--ext-diff``, ``--textconv``, ``--output``,
  ``--upload-pack``, ``rebase -x``, ``grep -O``; ``python -c`` and options
  before ``-m`` or the script; ``find -exec/-execdir/-ok/-delete/-fprint``;
  ``rg --pre``; ``tar --to-command``…), and no subcommand that does
  (``git config``, ``git submodule``, ``git bisect``, ``git difftool``…);
- for ``git push``/``fetch``/``pull``/``ls-remote``, a remote named in the
  repository, not an address (which would send the code elsewhere).

A list of plain commands (``cd src && pytest -q | tail``) is covered when
each of its commands is; a ``cd`` into the workspace needs no scope of its
own. Installers remember the exact command (``pip install requests``), since
each package runs its own code.

These prefixes are for commands the kernel confines (asked only because the
user wants every command asked): the sandbox bounds what an option could add.
Where nothing confines a command, such lists can never be complete (``make
--eval``, ``git rebase --exe`` as an abbreviation of ``--exec``, ``tar
--to-comm``), so an answer there remembers the **exact** command, or, for the
few programs in :data:`READ_ONLY_PROGRAMS` whose every option only reads or
prints, the program with any arguments (``exact=True``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cortana.tools.builtin.shell import ParsedCommand, SimpleCommand

__all__ = ["NEVER_REMEMBERED", "READ_ONLY_PROGRAMS", "command_prefixes", "prefix_label"]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


NEVER_REMEMBERED = (
    # they run their arguments as a command
    _names(
        "sh bash zsh dash ksh mksh fish csh tcsh busybox pwsh powershell env xargs eval exec command builtin "
        "source . sudo doas su pkexec runuser nohup setsid timeout nice ionice time watch stdbuf chroot unshare "
        "nsenter flock systemd-run at batch crontab script expect parallel strace ltrace gdb lldb valgrind perf "
        "taskset chrt prlimit trap alias"
    )
    # their arguments are programs in a language of their own
    | _names("awk gawk mawk nawk sed gsed vi vim nvim view ex emacs nano")
    # they talk to the network on their own: an "always" would cover sending anything anywhere
    | _names("curl wget nc ncat netcat socat ssh scp sftp rsync ftp telnet http https xh aria2c lftp open xdg-open")
)
"""Programs an "always" never covers: each call is asked."""

READ_ONLY_PROGRAMS = _names(
    "ls pwd cat head tail wc echo printf true false whoami id uname df du stat realpath readlink basename dirname "
    "grep egrep fgrep which nproc cmp"
)
"""Programs none of whose options runs code, writes a file or changes the system (GNU coreutils and grep; not
``sort -o``, ``tree -o``, ``file -C``, ``date -s``, ``hostname NAME``): an answer covers them with any arguments."""

_PYTHON = re.compile(r"^(python|pypy)[0-9.]*$")
_INTERPRETERS = _names("node nodejs ruby perl php lua luajit Rscript julia tclsh")
_REMOTE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class _Rule:
    """How a program's argv maps to its prefix.

    Attributes:
        subcommand: its first argument is a subcommand, part of the prefix (no option may come before it).
        refused_subcommands: subcommands an "always" never covers.
        known_subcommands: when set, only these (an unknown name may be an alias that runs anything).
        named: subcommands whose next word is part of the prefix too (``npm run build``).
        runs: subcommands whose next words are a command of their own, read by these same rules
            (``uv run pytest``); with ``subcommand=False``, the program's own arguments are that command.
        exact: subcommands remembered as the whole command (installers).
        refused_options: options that run code or change config, anywhere in the argv (``--x`` also as ``--x=…``).
        refused_by_subcommand: more such options for one subcommand (short ones mean other things elsewhere).
        remote_subcommands: subcommands whose first argument names where data goes: it must be a plain name.
    """

    subcommand: bool = False
    refused_subcommands: frozenset[str] = frozenset()
    known_subcommands: frozenset[str] | None = None
    named: frozenset[str] = frozenset()
    runs: frozenset[str] = frozenset()
    exact: frozenset[str] = frozenset()
    refused_options: frozenset[str] = frozenset()
    refused_by_subcommand: dict[str, frozenset[str]] = field(default_factory=dict)
    remote_subcommands: frozenset[str] = frozenset()


_GIT_COMMANDS = _names(
    "add am annotate apply archive blame branch bundle cat-file check-attr check-ignore check-mailmap "
    "check-ref-format checkout checkout-index cherry cherry-pick citool clean clone commit commit-graph commit-tree "
    "count-objects describe diff diff-files diff-index diff-tree fetch for-each-ref format-patch fsck gc "
    "get-tar-commit-id grep hash-object help index-pack init interpret-trailers log ls-files ls-remote ls-tree "
    "maintenance merge merge-base merge-file mktag mktree mv name-rev notes pack-objects pack-refs prune pull push "
    "range-diff read-tree rebase reflog remote repack replace rerere reset restore rev-list rev-parse revert rm "
    "shortlog show show-branch show-ref sparse-checkout stash status stripspace switch symbolic-ref tag "
    "unpack-objects update-index update-ref verify-commit verify-pack verify-tag version whatchanged worktree "
    "write-tree"
)
_RULES: dict[str, _Rule] = {
    "git": _Rule(
        subcommand=True,
        known_subcommands=_GIT_COMMANDS,
        refused_subcommands=_names(
            "config submodule bisect filter-branch difftool mergetool daemon instaweb web--browse send-email imap-send "
            "credential upload-pack receive-pack upload-archive shell fsmonitor--daemon hook"
        ),
        named=_names("remote stash worktree notes sparse-checkout maintenance"),
        refused_options=_names(
            "--exec-path --config-env --ext-diff --textconv --output --upload-pack --receive-pack --exec --template "
            "--open-files-in-pager --config --separate-git-dir --git-dir --work-tree --namespace --remote"
        ),
        refused_by_subcommand={
            "clone": _names("-c -u"),
            "ls-remote": _names("-u"),
            "archive": _names("-o"),
            "rebase": _names("-x"),
            "grep": _names("-O"),
        },
        remote_subcommands=_names("push fetch pull ls-remote"),
    ),
    "npm": _Rule(
        subcommand=True,
        named=_names("run run-script"),
        runs=_names("exec x"),
        exact=_names("install i add ci update"),
    ),
    "pnpm": _Rule(
        subcommand=True,
        named=_names("run"),
        runs=_names("exec dlx"),
        exact=_names("install i add update"),
    ),
    "yarn": _Rule(
        subcommand=True,
        named=_names("run"),
        runs=_names("exec dlx"),
        exact=_names("install add upgrade"),
    ),
    "bun": _Rule(subcommand=True, named=_names("run"), runs=_names("x"), exact=_names("install i add")),
    "npx": _Rule(runs=frozenset({""})),
    "pnpx": _Rule(runs=frozenset({""})),
    "bunx": _Rule(runs=frozenset({""})),
    "uvx": _Rule(runs=frozenset({""})),
    "uv": _Rule(subcommand=True, named=_names("pip tool"), runs=_names("run"), exact=_names("add install")),
    "poetry": _Rule(subcommand=True, runs=_names("run"), exact=_names("add install")),
    "pdm": _Rule(subcommand=True, runs=_names("run"), exact=_names("add install")),
    "hatch": _Rule(subcommand=True, runs=_names("run")),
    "pipenv": _Rule(subcommand=True, runs=_names("run"), exact=_names("install")),
    "pip": _Rule(subcommand=True, exact=_names("install download"), refused_subcommands=_names("config")),
    "pip3": _Rule(subcommand=True, exact=_names("install download"), refused_subcommands=_names("config")),
    "cargo": _Rule(subcommand=True, exact=_names("install add")),
    "go": _Rule(subcommand=True, exact=_names("install get")),
    "gem": _Rule(subcommand=True, exact=_names("install")),
    "bundle": _Rule(subcommand=True, runs=_names("exec"), exact=_names("add")),
    "make": _Rule(subcommand=True),
    "just": _Rule(subcommand=True),
    "tox": _Rule(subcommand=False),
    "docker": _Rule(subcommand=True, named=_names("compose container image")),
    "podman": _Rule(subcommand=True, named=_names("compose container image")),
    "kubectl": _Rule(subcommand=True),
    "gh": _Rule(subcommand=True, named=_names("pr issue repo run release")),
    "brew": _Rule(subcommand=True, exact=_names("install")),
    "apt": _Rule(subcommand=True, exact=_names("install")),
    "apt-get": _Rule(subcommand=True, exact=_names("install")),
    "conda": _Rule(subcommand=True, runs=_names("run"), exact=_names("install")),
    "dotnet": _Rule(subcommand=True),
    "deno": _Rule(subcommand=True, refused_subcommands=_names("eval repl")),
    "find": _Rule(refused_options=_names("-exec -execdir -ok -okdir -delete -fprint -fprint0 -fprintf -fls")),
    "fd": _Rule(refused_options=_names("-x --exec -X --exec-batch")),
    "rg": _Rule(refused_options=_names("--pre")),
    "tar": _Rule(
        refused_options=_names(
            "--to-command --use-compress-program -I --checkpoint-action --info-script -F --new-volume-script "
            "--rsh-command --rmt-command"
        )
    ),
    "zip": _Rule(refused_options=_names("-TT --unzip-command")),
    "man": _Rule(refused_options=_names("-P --pager -H --html")),
    "pytest": _Rule(refused_options=_names("-p --basetemp")),
    "py.test": _Rule(refused_options=_names("-p --basetemp")),
}
_DEFAULT = _Rule()

Prefix = tuple[str, ...]
WHOLE = "\x00"
"""Ends a prefix that is the whole command (an installer's): it covers that command exactly, nothing longer.
(No real word holds a NUL: the shell reader refuses such a command.)"""
CdCheck = Callable[[str], bool]
"""Whether ``cd`` into this literal folder keeps the command inside the workspace."""


def command_prefixes(parsed: ParsedCommand, cd_ok: CdCheck, *, exact: bool = False) -> tuple[Prefix, ...] | None:
    """The prefix an "always" remembers for each command of ``parsed`` (``cd`` left out); None when it is not plain.

    Args:
        parsed: the command, read by :func:`cortana.tools.builtin.shell.parse_command`.
        cd_ok: whether a ``cd`` into a literal folder stays within the workspace.
        exact: each command's whole argv, but the program alone for :data:`READ_ONLY_PROGRAMS` (where nothing
            confines the command).
    """
    if parsed.opaque or parsed.compound or not parsed.commands or "&" in parsed.separators:
        return None
    prefixes: list[Prefix] = []
    for command in parsed.commands:
        if not _plain_shape(command):
            return None
        argv = command.argv
        if argv[0] in ("cd", "pushd"):
            if len(argv) != 2 or argv[1].startswith("-") or not command.words[1].literal or not cd_ok(argv[1]):
                return None
            continue
        prefix = _exact(argv) if exact else _prefix(argv)
        if prefix is None:
            return None
        prefixes.append(prefix)
    return tuple(dict.fromkeys(prefixes)) or None


def prefix_label(prefix: Prefix) -> str:
    """How the approval prompt names a prefix: ``git status …``, or ``pip install requests`` for a whole command."""
    if prefix and prefix[-1] == WHOLE:
        return shlex.join(prefix[:-1])
    return f"{shlex.join(prefix)} …"


def _plain_shape(command: SimpleCommand) -> bool:
    """No assignment, no redirection but fd copies and /dev/null, no substitution; a literal program."""
    if command.assignments or not command.words or not all(redirect.harmless for redirect in command.redirects):
        return False
    if any(word.expands for word in command.words):
        return False
    program = command.words[0]
    return program.literal and bool(program.text) and not program.text.startswith("-")


def _exact(argv: Sequence[str]) -> Prefix | None:
    """The whole command; a read-only program's name alone; None for a program that runs its arguments."""
    name = argv[0].rsplit("/", 1)[-1]
    if name in NEVER_REMEMBERED or argv[0] != argv[0].strip():
        return None
    if name in READ_ONLY_PROGRAMS and "/" not in argv[0]:
        return (argv[0],)
    return (*argv, WHOLE)


def _prefix(argv: Sequence[str], depth: int = 0) -> Prefix | None:
    """The prefix of one plain command's argv by its program's rule; None: never remembered."""
    if depth > 3 or not argv or not argv[0]:
        return None
    program = argv[0]
    name = program.rsplit("/", 1)[-1]
    if name in NEVER_REMEMBERED:
        return None
    if _PYTHON.match(name) or name in _INTERPRETERS:
        return _interpreter_prefix(argv, depth, modules=bool(_PYTHON.match(name)))
    rule = _RULES.get(name, _DEFAULT)
    arguments = list(argv[1:])
    if _refused(arguments, rule.refused_options):
        return None
    if not rule.subcommand:
        if rule.runs:  # npx X …: X is a command of its own
            inner = _prefix(arguments, depth + 1) if arguments and not arguments[0].startswith("-") else None
            return None if inner is None else (program, *inner)
        return (program,)
    if not arguments:
        return (program,)
    sub = arguments[0]
    if sub.startswith("-"):
        return None  # options before the subcommand (git -c, git -C, make -f…)
    if sub in rule.refused_subcommands or (rule.known_subcommands is not None and sub not in rule.known_subcommands):
        return None
    rest = arguments[1:]
    if _refused(rest, rule.refused_by_subcommand.get(sub, frozenset())):
        return None
    if sub in rule.remote_subcommands and not _remote_named(rest):
        return None
    if sub in rule.exact:
        return (*argv, WHOLE)
    if sub in rule.runs:
        if not rest or rest[0].startswith("-"):
            return None
        inner = _prefix(rest, depth + 1)
        return None if inner is None else (program, sub, *inner)
    if sub in rule.named:
        if rest and not rest[0].startswith("-"):
            return (program, sub, rest[0])
        return (program, sub) if not rest else None
    return (program, sub)


def _interpreter_prefix(argv: Sequence[str], depth: int, *, modules: bool) -> Prefix | None:
    """``python -m pytest …`` -> ``python -m pytest``; ``node build.js …`` -> ``node build.js``; inline code: None.

    A module run with ``-m`` is read by its own program's rule: ``python -m pip install x`` is an installer.
    """
    if len(argv) < 2:
        return None
    first = argv[1]
    if modules and first == "-m":
        if len(argv) < 3 or argv[2].startswith("-"):
            return None
        inner = _prefix(argv[2:], depth + 1)
        return None if inner is None else (argv[0], "-m", *inner)
    if first.startswith("-"):
        return None  # -c, -e, -r, --eval, or an interpreter option that changes what runs
    return (argv[0], first)


def _refused(arguments: Sequence[str], refused: frozenset[str]) -> bool:
    """Whether any argument is one of ``refused`` (``--x=…`` for ``--x``; ``-Xvalue`` for a short ``-X``)."""
    if not refused:
        return False
    for argument in arguments:
        if argument == "--":
            return False
        if argument in refused or argument.split("=", 1)[0] in refused:
            return True
        if len(argument) > 2 and argument[0] == "-" and argument[1] != "-" and argument[:2] in refused:
            return True  # -c=x, -ux, -O'less': a short option with its value attached
    return False


def _remote_named(arguments: Sequence[str]) -> bool:
    """Whether the repository argument (the first one that is not an option) is a remote's name, or absent."""
    for argument in arguments:
        if argument.startswith("-"):
            continue
        return bool(_REMOTE_NAME.match(argument))
    return True
