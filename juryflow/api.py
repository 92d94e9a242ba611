"""The Python API: what the command line does, for a notebook or a script.

Wiring only, as the CLI is: runs go through the same preflight and Prefect flow, numbers
come from :class:`~juryflow.analysis.agreement_report.AgreementReport`, rows from
:mod:`juryflow.storage`.
Errors a user can cause are raised as ``ValueError`` subclasses with the message the CLI
prints; an interrupted run raises :class:`~juryflow.flows.runtime.interrupts.RunInterrupted`.

Run ids are accepted by unique prefix, and ``None`` means the newest run of the store.
Tables are Arrow (``to="pandas"`` gives a DataFrame; that needs pandas installed,
``pip install 'juryflow[pandas]'``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from juryflow.flows.runtime.prefect_env import apply_offline_defaults

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from juryflow.analysis.agreement_report import AgreementReport, DisputedItem
    from juryflow.maths.regression_stats import Thresholds
    from juryflow.planning.dry_run import DryRun
    from juryflow.planning.run_request import RunRequest
    from juryflow.storage.lake.attach import LakeTarget
    from juryflow.storage.store import Store

Format = Literal["arrow", "pandas"]
T = TypeVar("T")


def _on_this_thread_or_aside(work: Callable[[], T]) -> T:
    """Run ``work`` here, or on a worker thread when this thread already runs an event loop
    (a Jupyter cell does): a Prefect flow needs ``asyncio.run`` of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="juryflow") as pool:
        return pool.submit(work).result()


def _start_prefect() -> None:
    """Prefect's offline defaults, quiet logs, and (without ``PREFECT_API_URL``) the ephemeral
    server juryflow owns, started from this thread so that it dies with this process."""
    apply_offline_defaults(quiet=True)  # a script's output is its own: Prefect's INFO lines off
    from juryflow.flows.runtime.prefect_env import quiet_prefect_logging
    from juryflow.flows.runtime.prefect_server import start_owned_server

    quiet_prefect_logging()
    start_owned_server()


def _table(table: pa.Table, to: Format) -> Any:
    if to == "arrow":
        return table
    if to != "pandas":
        raise ValueError(f"to={to!r}: choose 'arrow' or 'pandas'")
    try:
        return table.to_pandas()
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "pandas is not installed: pip install 'juryflow[pandas]', or use to='arrow'"
        ) from None


@dataclass(frozen=True)
class Run:
    """A finished run (:func:`run`, :meth:`JuryStore.reaggregate`): its id, its store and
    the figures the CLI's summary shows."""

    run_id: str
    db: str
    summary: Mapping[str, Any] = field(repr=False)

    @property
    def store(self) -> JuryStore:
        return open_store(self.db)


@dataclass(frozen=True)
class JuryStore:
    """A juryflow store (a DuckDB file or a lake): its runs, their rows and their agreement."""

    path: Path | LakeTarget

    def _store(self) -> Store:
        from juryflow.storage.store import Store

        return Store(self.path)

    def run_id(self, run: str | None = None) -> str:
        """The full id of ``run`` (an id or a unique prefix; None: the newest run)."""
        from juryflow.storage.reads.run_queries import RunIdError, resolve_run_id

        if run is not None:
            return resolve_run_id(self._store(), run)
        newest = self._store().latest_run_id()
        if newest is None:
            raise RunIdError(f"no runs in {self.path} yet: juryflow.run(...) makes one")
        return newest

    @overload
    def runs(self, status: str | None = None, to: Literal["arrow"] = "arrow") -> pa.Table: ...
    @overload
    def runs(self, status: str | None = None, *, to: Literal["pandas"]) -> pd.DataFrame: ...
    def runs(self, status: str | None = None, to: Format = "arrow") -> Any:
        """Every run, newest first: status, kind, panel, dataset, items, judgments, unscored,
        cost and duration (``juryflow runs``)."""
        from juryflow.storage.reads.frames import runs_table

        return _table(runs_table(self._store(), status), to)

    def _rows(self, kind: str, run: str | None, to: Format) -> Any:
        from juryflow.storage.reads.frames import run_table

        return _table(run_table(self._store(), self.run_id(run), kind), to)

    def items(self, run: str | None = None, to: Format = "arrow") -> Any:
        """One row per item: its id, dataset row number, variables, metadata, human labels."""
        return self._rows("items", run, to)

    def judgments(self, run: str | None = None, to: Format = "arrow") -> Any:
        """One row per item × judge: score, verdict, unscored reason, anchored spans, tokens,
        cost, whether the answer came from the cache."""
        return self._rows("judgments", run, to)

    def consensus(self, run: str | None = None, to: Format = "arrow") -> Any:
        """One row per item: the panel's consensus (status, median score, spread, verdict,
        spans with their votes) beside the human labels."""
        return self._rows("consensus", run, to)

    def agreement(self, run: str | None = None) -> AgreementReport:
        """How much the judges agree, and how they fare against human labels: the numbers of
        ``juryflow agreement`` and the report. ``.judges_table()``, ``.pairs_table()`` and
        ``.accuracy_table()`` give them as Arrow tables."""
        from juryflow.analysis.agreement_report import agreement_report

        return agreement_report(self._store(), self.run_id(run))

    def disagreements(self, run: str | None = None, top: int = 10) -> list[DisputedItem]:
        """The items the judges disagree on most (``juryflow disagreements``)."""
        from juryflow.analysis.agreement_report import disagreements

        return disagreements(self._store(), self.run_id(run), top=top)

    def reaggregate(
        self,
        run: str | None = None,
        *,
        consensus: Sequence[str] | None = None,
        quorum: int | None = None,
        min_votes: int | None = None,
        calibration: str | None = None,
    ) -> Run:
        """A new run with ``run``'s judgments combined by another rule; no judge is called.

        ``consensus`` takes the CLI's ``FAMILY=RULE`` strings, e.g. ``["spans=at_least:2"]``.
        """
        run_id = self.run_id(run)
        _start_prefect()
        from juryflow.flows.reaggregate import reaggregate

        def work() -> dict[str, Any]:
            return asyncio.run(
                reaggregate(
                    run_id=run_id,
                    db=str(self.path),
                    quorum=quorum,
                    min_votes=min_votes,
                    consensus=list(consensus) if consensus is not None else None,
                    calibration=calibration,
                )
            )

        summary = _on_this_thread_or_aside(work)
        return Run(str(summary["run_id"]), str(self.path), summary)

    def compare(
        self, run: str | None, baseline: str, thresholds: Thresholds | None = None
    ) -> dict[str, Any]:
        """Compare ``run`` with ``baseline`` item by item, as ``juryflow regression`` does,
        store the comparison and return its figures (``regressed``, ``problems``, ...)."""
        from juryflow.flows.regression import compare_runs
        from juryflow.maths.regression_stats import Thresholds

        return compare_runs(
            self._store(), self.run_id(run), self.run_id(baseline), thresholds or Thresholds()
        )


def _sealed(db: str | Path | None) -> str | Path | None:
    """A catalog password written in ``db`` moved to the environment before any flow sees
    ``db`` (:func:`juryflow.storage.lake.attach.seal`)."""
    if isinstance(db, str) and db.startswith("ducklake:"):
        from juryflow.storage.lake.attach import seal

        return seal(db)
    return db


def open_store(db: str | Path | None = None) -> JuryStore:
    """The store at ``db`` (default: ``$JURYFLOW_DB`` or ``./juryflow.duckdb``), which must
    exist; :func:`run` creates one."""
    from juryflow.storage.store import Store

    store = Store(_sealed(db))
    if not store.exists():
        raise FileNotFoundError(
            f"no juryflow store at {store.path}: give db=, or make one with juryflow.run(db=...)"
        )
    return JuryStore(store.path)


def run(
    dataset: str | Path | RunRequest | None = None,
    panel: str | Path | None = None,
    *,
    progress: bool = True,
    **settings: Any,
) -> Run:
    """Judge every item of ``dataset`` with every judge of ``panel`` and store it all: the
    command ``juryflow run`` (defaults: the bundled sample and the offline panel).

    ``settings`` are :class:`~juryflow.planning.run_request.RunRequest`'s fields, each the
    ``juryflow run`` option of its name: ``db``, ``limit``/``sample``/``seed``, ``mapping``
    (``--map``, a dict), ``quorum``, ``calibration``, ``suite``, ``use_cache``,
    ``chunk_size``, ``max_cost`` (US dollars; past it
    :class:`~juryflow.flows.runtime.interrupts.RunInterrupted` is raised and the run
    resumes with ``resume=RUN``), ``workers``, ``early_stop``, ``audit_fraction``,
    ``batch``, ``batch_wait``, ``max_chars``, ``resume``, ... A request may also be passed
    whole as ``dataset``. ``progress=False`` keeps the progress bar and lines off stderr.
    A setting that cannot be used raises
    :class:`~juryflow.planning.run_request.RunSetupError` (a ValueError) in one line.
    """
    _start_prefect()
    from rich.console import Console

    from juryflow.planning.run_setup import prepare_run
    from juryflow.runner import run_evaluation

    request, _ = prepare_run(_request(dataset, panel, settings))
    console = Console(stderr=True, quiet=not progress)
    # Off a terminal the run prints plain progress lines to stderr; progress=False drops them.
    quiet = contextlib.nullcontext() if progress else contextlib.redirect_stderr(io.StringIO())
    with quiet:
        summary = _on_this_thread_or_aside(lambda: run_evaluation(console, request))
    return Run(str(summary["run_id"]), str(request.db), summary)


def _request(
    dataset: str | Path | RunRequest | None, panel: str | Path | None, settings: dict[str, Any]
) -> RunRequest:
    """The request of the API's arguments, its store resolved to where it is."""
    from juryflow.planning.run_request import RunRequest
    from juryflow.storage.store import Store

    if isinstance(dataset, RunRequest):
        request = dataset
    else:
        for name, value in (("dataset", dataset), ("panel", panel)):
            if value is not None:
                settings[name] = str(value)
        if isinstance(settings.get("db"), Path):
            settings["db"] = str(settings["db"])
        request = RunRequest.of(**settings)
    return request.model_copy(update={"db": str(Store(request.db).path)})


def import_judgments(path: str | Path, *, db: str | Path | None = None, **options: Any) -> Run:
    """Judgments made elsewhere as a run of the store, calling no model (``juryflow import
    FILE``). ``options`` are :class:`~juryflow.analysis.recorded_rows.ImportOptions`' fields,
    e.g. ``judges_map="judges_valid", label_column="human_valid", positive="false"``."""
    from juryflow.analysis.recorded_import import import_recorded
    from juryflow.analysis.recorded_rows import ImportOptions
    from juryflow.storage.store import Store

    result = import_recorded(Store(_sealed(db)), Path(path), ImportOptions(**options))
    return Run(result.run_id, result.db, result.as_dict())


def estimate(
    dataset: str | Path | RunRequest | None = None,
    panel: str | Path | None = None,
    **settings: Any,
) -> DryRun:
    """What :func:`run` with these settings would call and cost, per judge (``juryflow run
    --dry-run``): prompts rendered, nothing called, nothing written, no key needed.
    ``batch``: as :func:`run`'s, the batch judges costed at batch prices."""
    from juryflow.planning.dry_run import estimate_run

    return estimate_run(_request(dataset, panel, settings))
