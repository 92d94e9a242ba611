"""juryflow: a panel of LLM judges per evaluation item, their consensus and agreement, in DuckDB.

The Python API, the command line's twin (``juryflow run ...`` is ``juryflow.run(...)``)::

    import juryflow

    juryflow.estimate("data.jsonl", panel="panel.yaml", limit=50)   # calls and cost, no call
    run = juryflow.run("data.jsonl", panel="panel.yaml", db="evals.duckdb", limit=50)
    store = juryflow.open_store("evals.duckdb")
    store.runs(to="pandas")                    # every run: status, panel, items, cost, ...
    store.judgments(run.run_id)                # Arrow: one row per item x judge
    store.consensus(run.run_id, to="pandas")   # one row per item
    store.agreement(run.run_id).pairs_table()  # Cohen's kappa, span F1 per judge pair
    store.reaggregate(run.run_id, consensus=["spans=at_least:2"])
    juryflow.import_judgments("log.jsonl", db="evals.duckdb", judges_map="judges")  # recorded
    store.compare(run.run_id, baseline="20261124-...")

In the repository this folder, ``juryflow/``, holds the face (this API, the command line,
the viewer, the report, the terminal); each layer below it is a top-level folder of the same
name (``flows/``, ``judges/``, ``storage/``, ...), as ARCHITECTURE.md draws them. Names load on
first use, so importing a subpackage does not import Prefect.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from juryflow.analysis.agreement_report import AgreementReport
    from juryflow.api import JuryStore, Run, estimate, import_judgments, open_store, run
    from juryflow.flows.runtime.interrupts import RunInterrupted
    from juryflow.maths.regression_stats import Thresholds
    from juryflow.planning.run_request import RunRequest

__all__ = [
    "AgreementReport",
    "JuryStore",
    "Run",
    "RunInterrupted",
    "RunRequest",
    "Thresholds",
    "__version__",
    "estimate",
    "import_judgments",
    "open_store",
    "run",
]

_HOMES = {
    "AgreementReport": "juryflow.analysis.agreement_report",
    "JuryStore": "juryflow.api",
    "Run": "juryflow.api",
    "RunInterrupted": "juryflow.flows.runtime.interrupts",
    "RunRequest": "juryflow.planning.run_request",
    "Thresholds": "juryflow.maths.regression_stats",
    "estimate": "juryflow.api",
    "import_judgments": "juryflow.api",
    "open_store": "juryflow.api",
    "run": "juryflow.api",
}

try:
    __version__ = version("juryflow")
except PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'juryflow' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
