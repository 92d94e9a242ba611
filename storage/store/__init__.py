"""Every statement juryflow runs against its store. Bound parameters only; bulk writes go
through Arrow tables so that a chunk of judgments is one INSERT, not one per row.

:class:`Store` is one object whose parts sit in a module each: connections and
transactions (:mod:`.base`), the schema (:mod:`.checks`, :mod:`.migrations`), runs
(:mod:`.runs`), writes of a run's rows (:mod:`.writes`, with :mod:`.rows` and
:mod:`.span_sets`), reads (:mod:`.reads`), calibrations and reliabilities
(:mod:`.calibrations`), the judges' 429 answers (:mod:`.rate_limits`), deleting runs
(:mod:`.deletion`); the records of its rows are in :mod:`.records`.
"""

from __future__ import annotations

from juryflow.storage.store.calibrations import CalibrationsMixin
from juryflow.storage.store.checks import StoreSchemaError
from juryflow.storage.store.deletion import DeletionMixin
from juryflow.storage.store.migrations import MigrationsMixin
from juryflow.storage.store.rate_limits import RateLimitsMixin
from juryflow.storage.store.reads import ReadsMixin
from juryflow.storage.store.records import CalibrationRecord, ReliabilityRow, RunRecord, new_run_id
from juryflow.storage.store.rows import consensus_tables, judgment_tables
from juryflow.storage.store.runs import RunsMixin
from juryflow.storage.store.samples import SamplesMixin
from juryflow.storage.store.span_sets import BACKFILLS
from juryflow.storage.store.writes import WritesMixin

__all__ = [
    "BACKFILLS",
    "CalibrationRecord",
    "ReliabilityRow",
    "RunRecord",
    "Store",
    "StoreSchemaError",
    "consensus_tables",
    "judgment_tables",
    "new_run_id",
]


class Store(
    MigrationsMixin,
    RunsMixin,
    WritesMixin,
    ReadsMixin,
    CalibrationsMixin,
    RateLimitsMixin,
    SamplesMixin,
    DeletionMixin,
):
    """The juryflow store: a DuckDB file, or a DuckLake (``--db ducklake:...``).

    Each method opens, uses and closes its own connection to a file; a lake's connection
    is shared by the process. Every write is one transaction (:meth:`transact`), which a
    lake runs again when it loses a commit conflict to another writer.
    """
