"""Confinement by the kernel, and one keeper, for every process Cortana starts: commands, test runs, git, graphify,
MCP servers, the linter, hooks.

sandbox/policy.py     Sandbox, Confined, SandboxPolicy, KernelSupport: what a process may touch, and what the
                      kernel can hold it to (probed once per process); the environment without secrets
sandbox/processes.py  keeper_argv, run_kept, stop_kept: every process under the keeper
sandbox/kernel.py     Landlock, namespaces, seccomp and the hard-link scan, applied by a helper process to itself
                      (no Cortana import)
sandbox/keeper.py     the keeper of every process: confines it, no terminal, stops everything it started

See docs/security.md ("The sandbox") for what is confined, how, and what is not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cortana.lazy import lazy_names

if TYPE_CHECKING:
    from cortana.sandbox.policy import (
        PROTECTED,
        Confined,
        KernelSupport,
        Sandbox,
        SandboxPolicy,
        kernel_support,
    )

__all__ = ["PROTECTED", "Confined", "KernelSupport", "Sandbox", "SandboxPolicy", "kernel_support"]

__getattr__ = lazy_names(__name__, dict.fromkeys(__all__, "cortana.sandbox.policy"))
