"""How many processes make a run's model calls: ``--workers N``, ``auto`` or the default.

Read by the command line (to refuse a value in one line before anything starts) and by the
run's flow (to choose, after the panel is known); no Prefect here.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from juryflow.judges.panel import JudgeSpec, PanelSpec

CALLS_PER_PROCESS = 256
"""Concurrent calls one process is given by default: at ~2 ms of CPU per call a core serves
~500 calls/s, which 256 calls of 0.5 s keep busy (slower models need fewer processes)."""


AUTO = "auto"
"""``--workers auto``: as many processes as the machine and the rate limits allow."""

CALLS_PER_SECOND_PER_PROCESS = 500
"""What one event loop keeps up with (bench/README.md, "juryflow vs Inspect AI")."""

MIN_CALLS_PER_PROCESS = 32
"""Below this many concurrent calls a process idles: auto gives it no process of its own."""


@dataclass(frozen=True, slots=True)
class WorkersChoice:
    """How many processes make the model calls, and why (for the run's start line)."""

    count: int
    reason: str

    def describe(self) -> str:
        noun = "process" if self.count == 1 else "processes"
        return f"{self.count} call {noun} (--workers auto: {self.reason})"


def auto_workers(
    panel: PanelSpec, cpus: int | None = None, *, max_cost: float | None = None
) -> WorkersChoice:
    """``--workers auto``: one process per core, fewer when the panel's concurrency or its
    rate limits would leave a process idle, one when ``max_cost`` must be kept by one."""
    if max_cost is not None:
        return WorkersChoice(1, "--max-cost is kept by one process")
    llm = _model_judges(panel)
    if not llm:
        return WorkersChoice(1, "the panel makes no model calls")
    cores = _cores(cpus)
    calls = sum(spec.max_concurrency for spec in llm)
    caps = [
        (cores, f"{cores} cores"),
        (max(1, calls // MIN_CALLS_PER_PROCESS), f"{calls} concurrent calls"),
    ]
    rates = [spec.requests_per_minute for spec in llm]
    if all(rate is not None for rate in rates):
        per_second = sum(rate for rate in rates if rate is not None) / 60
        needed = max(1, math.ceil(per_second / CALLS_PER_SECOND_PER_PROCESS))
        caps.append((needed, f"rate limits of {per_second:,.0f} calls/s"))
    count, binding = min(caps, key=lambda cap: cap[0])
    return WorkersChoice(count, binding)


def default_workers(panel: PanelSpec, cpus: int | None = None) -> int:
    """Processes for a panel: one per CALLS_PER_PROCESS concurrent model calls, at most one
    per core; offline judges run in the flow's own process."""
    calls = sum(spec.max_concurrency for spec in _model_judges(panel))
    return max(1, min(_cores(cpus), math.ceil(calls / CALLS_PER_PROCESS)))


def _model_judges(panel: PanelSpec) -> list[JudgeSpec]:
    """The judges that make model calls; offline judges run in the flow's own process."""
    return [spec for spec in panel.judges if spec.provider != "offline"]


def _cores(cpus: int | None) -> int:
    return cpus if cpus is not None else (os.cpu_count() or 1)


def parse_workers(value: int | str | None) -> int | str | None:
    """``--workers``' value: a number of processes (1-64), ``auto``, or None (the default)."""
    if value is None or isinstance(value, int):
        return value
    text = value.strip().lower()
    if text == AUTO:
        return AUTO
    if text.isdigit() and 1 <= int(text) <= 64:
        return int(text)
    raise ValueError(f"--workers takes a number of processes (1-64) or 'auto', not {value!r}")


def check_workers(workers: int | str | None, *, distributed: bool, max_cost: float | None) -> None:
    """Refuse ``--workers N`` with what it cannot go with (ValueError, naming the fix)."""
    workers = parse_workers(workers)
    if workers is None or workers == 1:
        return
    if distributed:
        raise ValueError("--workers and --dask both spread the calls over processes: keep one")
    if max_cost is not None and workers != AUTO:
        raise ValueError(
            "--max-cost is kept by one process counting every call: drop --workers or --max-cost"
        )
