"""A real `askgate serve` with `--a2a on`, its humans played by `askgate bot` and
`askgate watch` (the MCP tests' process helpers), and the official A2A SDK's client."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

# The MCP tests' helpers, under a name of their own (both files are `conftest`).
_spec = importlib.util.spec_from_file_location(
    "askgate_processes", Path(__file__).resolve().parents[1] / "mcp" / "conftest.py"
)
assert _spec and _spec.loader
processes = importlib.util.module_from_spec(_spec)
sys.modules["askgate_processes"] = processes
_spec.loader.exec_module(processes)
Askgate = processes.Askgate


# Its fixtures, too: `askgate` (the test's processes) and `anyio_backend`.
askgate = processes.askgate
anyio_backend = processes.anyio_backend
