"""A run's settings as one record: what ``juryflow run``, the Python API, ``regression`` and
the deployments ask the `evaluate` flow to do.

Built once where the user said it (the command line's options, :func:`juryflow.api.run`'s
keywords, a deployment's ``request:`` parameters), checked once here, passed to the flow
as its one parameter (Prefect serialises it), and turned into a
:class:`~juryflow.planning.run_setup.RunPlan` once. A new setting is a field here, its
check in a validator, and the code that uses it; nothing carries it by name in between.

What needs the panel or the store (the quorum against the panel's size, a price for
``max_cost``, a resume's stored settings) is checked when the run is planned. The fields a
caller set (:attr:`given`) are what a resume compares with the run's own settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from juryflow.maths.names import did_you_mean
from juryflow.planning.worker_count import AUTO, check_workers, parse_workers
from juryflow.storage.datasets import DEFAULT_MAX_CHARS, DatasetError, parse_mapping
from juryflow.storage.shards import ShardError, ShardSpec, check_run_id, parse_shard

if TYPE_CHECKING:
    from juryflow.judges.panel import PanelSpec

__all__ = [
    "RESUME_KEEPS",
    "RunRequest",
    "RunSetupError",
    "check_selection",
    "check_sizes",
    "checked_shard",
]

RESUME_KEEPS = (
    "quorum",
    "calibration",
    "limit",
    "sample",
    "early_stop",
    "audit_fraction",
    "batch",
)
"""Settings a resumed run keeps from its start, refused beside ``--resume`` when given."""

_OPTION_NAMES = {"mapping": "map", "use_cache": "no-cache"}
"""The command line's names of the fields whose option is named otherwise."""


class RunSetupError(ValueError):
    pass


def check_sizes(chunk_size: int | None, max_chars: int) -> None:
    """The command line range-checks these; a flow called directly gets the same answer."""
    if chunk_size is not None and chunk_size < 1:
        raise RunSetupError(f"--chunk-size {chunk_size}: give at least 1 item per task")
    if max_chars < 1:
        raise RunSetupError(f"--max-chars {max_chars}: give at least 1 character")


def check_selection(limit: int | None, sample: int | None) -> None:
    """``--limit`` and ``--sample`` are whole positive numbers, and only one of them."""
    if limit is not None and sample is not None:
        raise RunSetupError("give --limit N (the first N items) or --sample N, not both")
    for name, value in (("--limit", limit), ("--sample", sample)):
        if value is not None and value < 1:
            raise RunSetupError(f"{name} {value}: give 1 or more items")


def checked_shard(shard: str | None, run_id: str | None, resume: str | None) -> ShardSpec | None:
    """``--shard I/N`` with its ``--run-id``, checked before anything is opened."""
    try:
        if shard is None:
            if run_id is not None:
                raise ShardError(
                    "--run-id names a sharded run: give --shard I/N with it (or drop it)"
                )
            return None
        if resume:
            raise ShardError(
                "--shard resumes by itself: run the same --shard I/N --run-id RUN again "
                "(drop --resume)"
            )
        spec = parse_shard(shard)
        check_run_id(run_id)
    except ShardError as error:
        raise RunSetupError(str(error)) from None
    return spec


class RunRequest(BaseModel):
    """Every setting of one run; each field is the ``juryflow run`` option of its name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dataset: str | None = None
    """JSONL, CSV or Parquet file (default: the bundled sample)."""
    panel: str | None = None
    """Panel YAML file (default: the offline panel)."""
    db: str | None = None
    """The store: a DuckDB file or ``ducklake:...`` (default: ``$JURYFLOW_DB`` or
    ``juryflow.duckdb``). A catalog password written in it is moved to the environment."""
    resume: str | None = None
    """Continue this interrupted run, with the settings it started with."""
    suite: str | None = None
    """Suite name for regressions (default: dataset stem and panel name)."""
    chunk_size: int | None = None
    """Items per task (default 500; 10,000 in batch mode)."""
    quorum: int | None = None
    """Judges that must answer for a consensus: 1 to the panel size."""
    mapping: dict[str, str] = {}
    """Prompt variable -> dataset column (``--map VAR=COLUMN``; a list of such is read)."""
    use_cache: bool = True
    """Reuse stored answers to the same prompt (``--no-cache``: call models again)."""
    max_chars: int = DEFAULT_MAX_CHARS
    """Longest accepted value, in characters."""
    calibration: str | None = None
    """Combine the judges by this stored calibration (``juryflow calibrate``)."""
    limit: int | None = None
    """Judge only the first N items of the dataset."""
    sample: int | None = None
    """Judge N items drawn at random from the whole dataset (with ``seed``)."""
    seed: int = 0
    """Seed of ``sample`` (same seed, same items)."""
    max_cost: float | None = None
    """USD: start no model call once this run's calls cost this much (resumable, exit 3)."""
    workers: int | Literal["auto"] | None = None
    """Processes making the model calls, 1-64, or ``auto``."""
    dask: str | None = None
    """Run the chunk tasks on Dask: ``local`` or a scheduler address."""
    shard: str | None = None
    """Judge only shard ``I/N`` of the items of run ``run_id``."""
    run_id: str | None = None
    """The run every shard of a sharded run writes to."""
    take_over: bool = False
    """Claim the shard from a process on another machine that is gone."""
    data_path: str | None = None
    """Where a new DuckLake store keeps its Parquet files."""
    early_stop: bool | None = None
    """Call a judge only while it can still change the item's consensus (panel's default)."""
    audit_fraction: float | None = None
    """Share of the items judged by every judge anyway under early stopping (0 to 1)."""
    batch: bool | None = None
    """The LLM judges' calls through their providers' batch APIs (panel's default)."""
    batch_wait: float | None = None
    """Seconds after which a run still waiting for its batches stops, resumable."""

    @classmethod
    def of(cls, **settings: Any) -> RunRequest:
        """The request of ``settings``, or :class:`RunSetupError` in one line."""
        unknown = sorted(set(settings) - set(cls.model_fields))
        if unknown:
            hint = did_you_mean(unknown[0], cls.model_fields)
            raise RunSetupError(f"unknown run setting {unknown[0]!r}{hint}")
        try:
            return cls(**settings)
        except ValidationError as error:
            raise RunSetupError(_one_line(error)) from None

    @property
    def given(self) -> frozenset[str]:
        """The settings the caller set, defaults left out."""
        return frozenset(self.model_fields_set)

    @field_validator("db")
    @classmethod
    def _sealed(cls, db: str | None) -> str | None:
        from juryflow.storage.lake.attach import seal

        return seal(db)

    @field_validator("mapping", mode="before")
    @classmethod
    def _mapping(cls, mapping: object) -> object:
        if mapping is None:
            return {}
        if isinstance(mapping, Sequence) and not isinstance(mapping, str):
            try:
                return parse_mapping([str(pair) for pair in mapping])
            except DatasetError as error:
                raise ValueError(str(error)) from None
        return dict(mapping) if isinstance(mapping, Mapping) else mapping

    @field_validator("workers", mode="before")
    @classmethod
    def _workers(cls, workers: object) -> object:
        return parse_workers(workers) if isinstance(workers, str | int | None) else workers

    @model_validator(mode="after")
    def _consistent(self) -> RunRequest:
        check_sizes(self.chunk_size, self.max_chars)
        check_selection(self.limit, self.sample)
        checked_shard(self.shard, self.run_id, self.resume)
        check_workers(self.workers, distributed=self.dask is not None, max_cost=self.max_cost)
        if self.seed < 0:
            raise ValueError(f"--seed {self.seed}: give 0 or more")
        if self.max_cost is not None and self.max_cost < 0:
            raise ValueError(f"--max-cost {self.max_cost}: give 0 or more US dollars")
        if self.audit_fraction is not None and not 0.0 <= self.audit_fraction <= 1.0:
            raise ValueError(
                f"--audit-fraction {self.audit_fraction} is not a share: give one from 0 to 1"
            )
        if self.batch_wait is not None and self.batch_wait < 0:
            raise ValueError(f"--batch-wait {self.batch_wait}: give 0 or more seconds")
        if self.resume is not None:
            kept = [
                name
                for name in RESUME_KEEPS
                if name in self.model_fields_set and getattr(self, name) is not None
            ]
            if kept:
                named = ", ".join(f"--{name.replace('_', '-')}" for name in kept)
                raise ValueError(
                    f"--resume continues a run with the settings it started with; drop {named}"
                    " (or start a new run, or re-aggregate it: juryflow reaggregate RUN "
                    "--consensus ...)"
                )
        return self

    @property
    def auto_workers(self) -> bool:
        return self.workers == AUTO

    def quorum_for(self, panel: PanelSpec) -> int:
        """The run's quorum: ``quorum`` if ``panel`` can meet it, else the panel's own;
        RunSetupError for a number outside 1..panel size (0 is a number, not "unset")."""
        if self.quorum is None:
            return panel.effective_quorum
        size = len(panel.judges)
        if not 1 <= self.quorum <= size:
            noun = "judge" if size == 1 else "judges"
            raise RunSetupError(
                f"--quorum {self.quorum} is out of range: pass 1 to {size} (the panel has "
                f"{size} {noun})"
            )
        return self.quorum


def _one_line(error: ValidationError) -> str:
    """The first problem of ``error`` as the command line says it."""
    first = error.errors()[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, Exception):
        return str(cause)
    where = ".".join(str(part) for part in first["loc"])
    option = _OPTION_NAMES.get(where, where.replace("_", "-"))
    return f"--{option}: {first['msg']}" if where else str(first["msg"])
