"""Stop a judge whose calls cannot succeed: its key is rejected, or its model is unknown.

Such an answer (HTTP 401/403/404) does not depend on the item, so calling again for every
remaining item only repeats it, costs time and floods the store with identical failures.
After ``STOP_AFTER`` consecutive fatal failures a judge's breaker opens: its remaining
calls are not made, their items get an unscored row saying why, and the run's end names
what to fix. One breaker per (run, judge) in a process, shared by all the run's chunks.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from juryflow.judges.panel import JudgeSpec
from juryflow.judges.providers.base import ProviderError
from juryflow.judges.redact import redact_text

STOP_AFTER = 3
"""Consecutive fatal failures that stop a judge: enough to rule out one odd answer."""


@dataclass(frozen=True, slots=True)
class StoppedJudge:
    """Why a judge was stopped, and what the user must change for the next run."""

    judge_id: str
    status: int | None
    kind: str
    failures: int
    fix: str
    message: str

    @property
    def reason(self) -> str:
        """The unscored reason of each item the stopped judge was not called for."""
        return (
            f"judge stopped: its calls failed {self.failures} times in a row with "
            f"{self._what()}; {self.fix}"
        )

    def line(self) -> str:
        """The one line the command line prints at the run's end."""
        return (
            f"judge {self.judge_id!r} stopped after {self.failures} calls failed with "
            f"{self._what()}: {self.fix}"
        )

    def _what(self) -> str:
        status = f"HTTP {self.status} " if self.status is not None else ""
        # Real servers explain a rejected key at length; the gist fits in the line.
        message = self.message if len(self.message) <= 120 else self.message[:117] + "..."
        return f"{status}{self.kind} ({message})"

    def as_dict(self) -> dict[str, object]:
        return {
            "judge_id": self.judge_id,
            "status": self.status,
            "kind": self.kind,
            "failures": self.failures,
            "fix": self.fix,
            "line": self.line(),
        }


class JudgeStopped(Exception):
    """Raised instead of making a call once the judge's breaker is open."""

    def __init__(self, stopped: StoppedJudge) -> None:
        super().__init__(stopped.reason)
        self.stopped = stopped


def fix_for(spec: JudgeSpec, error: ProviderError) -> str:
    """What to change so that ``spec``'s calls stop failing with ``error``."""
    if error.kind == "not_found":
        # No base_url in the line: it may carry a password or a key in its query.
        return (
            f"the server does not know model {spec.model!r}; fix `model` of judge "
            f"{spec.id!r} in the panel file (or its base_url)"
        )
    variable = spec.key_env or "the key variable"
    secret = ""
    if spec.api_key_secret:
        secret = f" (or the Prefect Secret block {spec.api_key_secret!r})"
    return f"the API key was rejected; set a valid key in {variable}{secret}"


class CircuitBreaker:
    """Counts a judge's consecutive fatal failures, and the 429s it got for the run's
    summary; thread-safe (Dask workers use threads)."""

    def __init__(self, spec: JudgeSpec, threshold: int = STOP_AFTER) -> None:
        if threshold < 1:
            raise ValueError("threshold must be at least 1")
        self.spec = spec
        self.threshold = threshold
        self._lock = threading.Lock()
        self._failures = 0
        self._stopped: StoppedJudge | None = None
        self._rate_limited = 0

    @property
    def stopped(self) -> StoppedJudge | None:
        with self._lock:
            return self._stopped

    def check(self) -> None:
        """Raise :class:`JudgeStopped` if the judge was stopped; call right before a call."""
        stopped = self.stopped
        if stopped is not None:
            raise JudgeStopped(stopped)

    @property
    def rate_limited(self) -> int:
        """Calls answered 429 so far, retried ones included."""
        with self._lock:
            return self._rate_limited

    def succeeded(self) -> None:
        with self._lock:
            if self._stopped is None:
                self._failures = 0

    def failed(self, error: ProviderError) -> None:
        if error.status == 429:
            with self._lock:
                self._rate_limited += 1
        if not error.fatal:
            # A timeout or a 500 says nothing about the key or the model.
            self.succeeded()
            return
        with self._lock:
            if self._stopped is not None:
                return
            self._failures += 1
            if self._failures >= self.threshold:
                self._stopped = StoppedJudge(
                    judge_id=self.spec.id,
                    status=error.status,
                    kind=error.kind,
                    failures=self._failures,
                    fix=redact_text(fix_for(self.spec, error)),
                    message=redact_text(error.message),
                )


_registry_lock = threading.Lock()
_registry: dict[tuple[str, str], CircuitBreaker] = {}


def breaker_for(run_id: str, spec: JudgeSpec) -> CircuitBreaker:
    """The breaker of ``spec`` in run ``run_id``, shared by every chunk of it in this process."""
    with _registry_lock:
        breaker = _registry.get((run_id, spec.id))
        if breaker is None:
            breaker = _registry[(run_id, spec.id)] = CircuitBreaker(spec)
        return breaker


def forget_run(run_id: str) -> None:
    """Drop the run's breakers (the run has ended; a new run tries its judges afresh)."""
    with _registry_lock:
        for key in [key for key in _registry if key[0] == run_id]:
            del _registry[key]
