"""Confinement by the kernel for every process Cortana starts: commands, test runs, git, graphify, MCP servers.

sandbox/policy.py   Sandbox, Confined, SandboxPolicy, KernelSupport: what a process may touch, and what the
                    kernel can hold it to (probed once per process)
sandbox/kernel.py   Landlock, namespaces and seccomp applied by a helper process to itself (no Cortana import)
sandbox/keeper.py   the keeper of one shell command: confines it, and stops everything it started

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
