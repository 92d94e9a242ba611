"""Everything a run decides before the first call: dataset, panel, keys, store and run row."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from juryflow.judges.factory import check_keys
from juryflow.judges.panel import PanelSpec, load_panel, parse_panel
from juryflow.judges.sampling.panel_samples import sampling_warnings
from juryflow.maths.reducers import DEFAULT_RULE, ConsensusRule, RuleError
from juryflow.planning.early_stop_plan import early_stop_plan
from juryflow.planning.run_request import (
    RunRequest,
    RunSetupError,
    check_selection,
    check_sizes,
    checked_shard,
)
from juryflow.prompts.loader import PromptTemplate
from juryflow.storage.datasets import DEFAULT_MAX_CHARS, dataset_fingerprint
from juryflow.storage.journal import Journal, journal_path, read_run_header, write_run_header
from juryflow.storage.shards import (
    ShardError,
    ShardLease,
    ShardSpec,
    check_claim,
    claim_shard,
    create_or_join,
    lease_seconds,
)
from juryflow.storage.store import RunRecord, Store, new_run_id

__all__ = [
    "RunPlan",
    "RunSetupError",
    "check_selection",
    "check_sizes",
    "checked_shard",
    "plan_run",
    "prepare_run",
]

# The package data `juryflow.examples`: the repository's examples/ in a checkout or an editable
# install of either mode, juryflow/examples/ in the wheel.
BUNDLED_DATASET = Path(
    str(resources.files("juryflow.examples").joinpath("ragtruth_data2txt_sample.jsonl"))
).resolve()
DETECTOR_VARIABLES = ("reference", "response")
DEFAULT_CHUNK_SIZE = 500
RECORDED_BEFORE_CHUNK_SIZE = 200
"""The chunk size of runs stored before runs recorded theirs (the default then)."""
BATCH_CHUNK_SIZE = 10_000
"""Items per chunk in batch mode unless ``--chunk-size`` says otherwise: a run of up to
this many items makes one batch per judge (per round of early stopping)."""


logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunPlan:
    run_id: str
    store: Store
    panel: PanelSpec
    dataset: Path
    mapping: dict[str, str]
    quorum: int
    chunk_size: int
    max_chars: int
    use_cache: bool
    resumed: bool
    rule: ConsensusRule = DEFAULT_RULE
    """The consensus rule, ``verdict: auto`` resolved for the panel."""
    limit: int | None = None
    """Judge only the first ``limit`` items of the dataset."""
    sample: int | None = None
    """Judge ``sample`` items drawn uniformly with ``seed`` (see ``select_items``)."""
    seed: int = 0
    shard: ShardSpec | None = None
    """Judge only this shard of the run's items (``--shard I/N``); None: all of them."""
    lease: ShardLease | None = None
    """This process's claim on ``shard``, which the run renews before its writes."""

    @property
    def journal_key(self) -> str:
        """The journal's name: a shard has its own (two may run on one machine)."""
        if self.shard is None:
            return self.run_id
        return f"{self.run_id}.shard-{self.shard.index}-of-{self.shard.count}"

    def holds(self, item_id: str) -> bool:
        """Is the item this plan's to judge (every item, unless sharded)?"""
        return self.shard is None or self.shard.holds(item_id)

    @property
    def templates(self) -> list[PromptTemplate]:
        """The panel's prompt templates, each once (catalogue and file prompts alike)."""
        found: dict[str, PromptTemplate] = {}
        for judge in self.panel.judges:
            if judge.prompt:
                template = judge.template()
                found.setdefault(template.ref, template)
        return list(found.values())

    @property
    def needed_variables(self) -> list[str]:
        needed: dict[str, None] = {}
        for template in self.templates:
            needed.update(dict.fromkeys(template.variables))
        if any(j.provider == "offline" for j in self.panel.judges):
            needed.update(dict.fromkeys(DETECTOR_VARIABLES))
        return list(needed)

    @property
    def text_variable(self) -> str:
        """The variable whose text spans point into (the judged response)."""
        for template in self.templates:
            if template.span_variable:
                return template.span_variable
        for judge in self.panel.judges:
            if judge.provider == "recorded":  # imported: its text is stored as the response
                return judge.span_variable or "response"
        needed = self.needed_variables
        return "response" if "response" in needed or not needed else needed[-1]


def requested_panel(request: RunRequest) -> PanelSpec:
    """The request's panel file with the request's ``early_stop``, ``audit_fraction`` and
    ``batch`` over its own settings (a judge's own ``batch`` still wins); stored with the
    run, so a resume keeps them."""
    return with_batch(with_early_stop(load_panel(request.panel), request), request.batch)


def with_early_stop(panel: PanelSpec, request: RunRequest) -> PanelSpec:
    changes: dict[str, Any] = {}
    if request.early_stop is not None:
        changes["early_stop"] = request.early_stop
    if request.audit_fraction is not None:
        changes["audit_fraction"] = request.audit_fraction
    return panel.model_copy(update=changes) if changes else panel


def with_batch(panel: PanelSpec, batch: bool | None) -> PanelSpec:
    """The panel with ``--batch`` / ``--no-batch`` over its own ``batch``."""
    return panel if batch is None else panel.model_copy(update={"batch": batch})


def chunk_size_for(chunk_size: int | None, panel: PanelSpec) -> int:
    """``--chunk-size``, else 500 items per chunk, or 10,000 when a judge sends batches: a
    batch per judge and chunk, so few and large. 500, not more: a chunk's answers are held
    until it is written, and at 1,000 a 10,000-item run of three judges passed 500 MB
    (``bench/README.md``); fewer, larger chunks cost less Prefect and store work per call."""
    if chunk_size is not None:
        return chunk_size
    batching = any(panel.uses_batch(spec) for spec in panel.judges)
    return BATCH_CHUNK_SIZE if batching else DEFAULT_CHUNK_SIZE


def public_panel(panel: PanelSpec) -> dict[str, Any]:
    """The panel as stored with a run: no header value, no credential inside a base_url."""
    return panel.public_dict()


def consensus_rule_for(
    store: Store, panel: PanelSpec, calibration: str | None = None
) -> ConsensusRule:
    """The panel's own rule, or the named calibration's when the run asks for one."""
    if calibration is None:
        return panel.consensus_rule()
    record = store.get_calibration(calibration)
    if record is None:
        known = ", ".join(store.calibration_names()) or "none yet"
        raise RunSetupError(
            f"no calibration {calibration!r} in {store.path} (known: {known}); make one with "
            "`juryflow calibrate RUN --name NAME` on a run over labelled items"
        )
    try:
        rule = ConsensusRule.from_dict(record.rule)
        rule.check_judges([j.id for j in panel.judges])
    except RuleError as error:
        raise RunSetupError(f"calibration {calibration!r}: {error}") from None
    return rule.resolve(panel.all_span_judges)


def check_span_texts(panel: PanelSpec, columns: dict[str, str]) -> None:
    """Every span judge flags spans in the same dataset column; raises RunSetupError.

    The consensus votes on character offsets: offsets into two different texts would be
    combined as if they were one. A prompt file's ``span_variable`` can name any variable,
    so this is checked once the columns are known.
    """
    seen: dict[str, str] = {}
    for judge in panel.judges:
        if judge.provider == "offline":
            variable: str | None = "response"
        else:
            template = judge.template()
            variable = template.span_variable if template.output_kind == "spans" else None
        if variable is None:
            continue
        column = columns.get(variable, variable)
        seen.setdefault(column, f"{judge.id} ({variable})")
    if len(seen) > 1:
        found = ", ".join(f"{judge} in column {column!r}" for column, judge in seen.items())
        raise RunSetupError(
            f"the panel's span judges flag spans in different texts: {found}; the consensus "
            "compares character offsets, so map their span variables to one column with "
            "--map VAR=COLUMN"
        )


def checked_inputs(panel_spec: PanelSpec, request: RunRequest) -> Path:
    """What a run and a dry run both check before anything else, with no key and no store:
    the quorum, the dataset, its columns against the prompts' variables (after ``--map``)
    and the span judges' texts. Returns the dataset's path."""
    from juryflow.storage.datasets import dataset_columns, resolve_columns

    request.quorum_for(panel_spec)
    dataset_path = Path(request.dataset) if request.dataset else BUNDLED_DATASET
    if not dataset_path.is_file():
        raise RunSetupError(f"dataset {dataset_path} does not exist")
    probe = RunPlan(
        run_id="",
        store=Store(":memory:"),
        panel=panel_spec,
        dataset=dataset_path,
        mapping=dict(request.mapping),
        quorum=panel_spec.effective_quorum,
        chunk_size=1,
        max_chars=DEFAULT_MAX_CHARS,
        use_cache=False,
        resumed=False,
    )
    columns = resolve_columns(dataset_columns(dataset_path), probe.needed_variables, probe.mapping)
    check_span_texts(panel_spec, columns.variables)
    return dataset_path


def prepare_run(request: RunRequest) -> tuple[RunRequest, list[str]]:
    """Everything a run checks before Prefect starts, for the command line and the API
    alike: the budget, then a new run's panel, keys, columns, store and calibration (and
    a shard's agreement with its run), or a resumed run's state and the options given
    beside ``--resume``. Returns the request (a resumed run's id in full) and warnings."""
    if request.data_path is not None:
        from juryflow.storage.connection import DATA_PATH_ENV, resolve_target

        resolve_target(request.db, request.data_path)  # a DuckDB file with it is refused
        if not request.data_path.strip():
            raise RunSetupError("--data-path is empty; pass a directory or an s3://... prefix")
        import os

        # For every store this process opens: the first to attach a new lake creates it.
        os.environ[DATA_PATH_ENV] = request.data_path
    if request.resume is not None:
        from juryflow.storage.reads.run_queries import resolve_run_id

        # A store deleted during the run is rebuilt from the run's journal first.
        claim_before_reading(request.db, request.resume)
        restored = restore_from_journal(request.db, request.resume)
        request = request.model_copy(
            update={"resume": resolve_run_id(Store(request.db), request.resume)}
        )
        check_budget(request)
        warnings = preflight_resume(request, restored=True)
        return request, [restored, *warnings] if restored else warnings
    check_budget(request)
    warnings = preflight(request)
    if request.shard is not None and request.run_id is not None:
        warnings += preflight_shard(request)
    return request, warnings


def check_budget(request: RunRequest) -> None:
    """Refuse ``--max-cost`` before a run starts when it could not be kept: a model without
    a price (the panel's ``prices:`` names it), or Dask workers. Raises BudgetError."""
    from juryflow.judges.budget import check_enforceable

    if request.max_cost is None:
        return
    distributed = request.dask is not None
    if request.resume is None:
        check_enforceable(load_panel(request.panel), request.max_cost, distributed=distributed)
        return
    # A resumed run keeps the panel it started with, as stored.
    store = Store(request.db)
    run = store.get_run(request.resume) if store.exists() else None
    if run is None:
        return  # no such run: planning the run says so
    check_enforceable(
        parse_panel(run.panel, f"run {request.resume}"),
        request.max_cost,
        distributed=distributed,
        resumed=True,
    )


def preflight(request: RunRequest) -> list[str]:
    """Fail before Prefect starts on what needs no Prefect: panel, keys, quorum, columns,
    the store (created or brought to the latest schema) and the named calibration.
    Returns warnings to show."""
    panel_spec = requested_panel(request)
    check_keys(panel_spec)
    checked_inputs(panel_spec, request)
    store = Store(request.db)
    store.migrate()
    rule = consensus_rule_for(store, panel_spec, request.calibration)
    _, refused = early_stop_plan(panel_spec, rule, request.quorum, 0)
    return ([refused] if refused else []) + sampling_warnings(panel_spec)


def _as_stored(value: Any) -> Any:
    """``value`` as it reads back from the runs table (tuples become lists)."""
    return json.loads(json.dumps(value))


def _panel_conflict(panel: str, run: RunRecord) -> list[str]:
    given = load_panel(panel)
    if _as_stored(given.public_dict()) == run.panel:
        return []
    stored = parse_panel(run.panel, f"run {run.run_id}")
    for judge in given.judges:
        kept = next((j for j in stored.judges if j.id == judge.id), None)
        if (
            kept is not None
            and judge.prompt_file
            and kept.prompt_file
            and judge.prompt == kept.prompt
            and judge.prompt_text != kept.prompt_text
        ):
            return [
                f"--panel {panel} (judge {judge.id}'s prompt file {judge.prompt} changed "
                "since the run started; without --panel the resume uses the stored text)"
            ]
    return [f"--panel {panel} (the run's panel {run.panel_name} differs)"]


def resume_conflicts(run: RunRecord, given: RunRequest) -> list[str]:
    """The given options that differ from what ``run`` started with, each with the run's.

    A resumed run takes its options from the store; one given differently would be
    silently ignored, so it is named instead. Repeating the run's own value is fine.
    Only the settings the caller gave (:attr:`RunRequest.given`) are compared.
    """
    stored = run.parameters or {}
    found: list[str] = []

    def differs(option: str, value: object, kept: object) -> None:
        if option.lstrip("-").replace("-", "_") not in given.given:
            return
        if value is not None and kept is not None and value != kept:
            found.append(f"{option} {value} (the run's: {kept})")

    if (
        given.dataset is not None
        and run.dataset is not None
        and Path(given.dataset).resolve() != Path(run.dataset)
    ):
        found.append(f"DATASET {given.dataset} (the run read {run.dataset})")
    if given.panel is not None:
        found += _panel_conflict(given.panel, run)
    if "mapping" in given.given and given.mapping != dict(stored.get("mapping") or {}):
        kept = " ".join(f"{k}={v}" for k, v in (stored.get("mapping") or {}).items()) or "none"
        found.append(f"--map {' '.join(f'{k}={v}' for k, v in given.mapping.items())} "
                     f"(the run's: {kept})")  # fmt: skip
    differs("--chunk-size", given.chunk_size, stored.get("chunk_size"))
    differs("--max-chars", given.max_chars, stored.get("max_chars"))
    differs("--suite", given.suite, run.suite)
    if not given.use_cache and stored.get("use_cache", True):
        found.append("--no-cache (the run uses the cache)")
    return found


def claim_before_reading(db: str | None, run_id: str) -> None:
    """``--resume RUN``: the run's lock, taken before the store is read, when the run has one
    (``run_id`` in full, a DuckDB file). The process judging the run may hold the store at
    that moment (a chunk being written, or the process stopped there), and a second resume
    that read the store first waited for it as long, instead of being refused; RunSetupError
    naming the process that judges the run."""
    from juryflow.storage.store.liveness import liveness_path

    store = Store(db)
    if isinstance(store.path, Path) and liveness_path(store.path, run_id).exists():
        _claim(store, run_id, "resume")


def restore_from_journal(db: str | None, run_id: str) -> str | None:
    """``--resume`` of a run whose store was deleted (or replaced) while it ran: the run's
    row, kept beside its journal, goes into the store (made anew if need be), and the resume
    then stores the journal's judgments as ever. Returns a line saying so, or None when the
    store has the run (or there is nothing to rebuild it from)."""
    store = Store(db)
    if not isinstance(store.path, Path):
        return None
    journal = journal_path(store.path, run_id)
    record = read_run_header(journal)
    if record is None:
        return None
    store.migrate()
    if store.get_run(run_id) is not None:
        return None
    store.create_run(replace(record, status="interrupted", finished_at=None))
    judged = len(Journal(journal).replay())
    return (
        f"the store {store.path} did not hold run {run_id}: its row is restored from the "
        f"run's journal, and the {judged} judgments there are stored as the run resumes"
    )


def preflight_resume(request: RunRequest, *, restored: bool = False) -> list[str]:
    """What ``_resume_plan`` checks, and that the options given beside ``--resume`` agree
    with the run, before Prefect starts; returns warnings to show. ``restored``: the caller
    already ran :func:`restore_from_journal` (:func:`prepare_run` does, to resolve the id)."""
    db, run_id = request.db, request.resume
    assert run_id is not None
    if not restored:
        claim_before_reading(db, run_id)
    restored_line = None if restored else restore_from_journal(db, run_id)
    store = Store(db)
    store.migrate()
    run, _, warnings = _resumable(store, run_id)
    if restored_line is not None:
        warnings = [restored_line, *warnings]
    conflicts = resume_conflicts(run, request)
    if conflicts:
        raise RunSetupError(
            f"--resume {run_id} continues the run with the options it started with; "
            f"drop {'; '.join(conflicts)} (or start a new run without --resume)"
        )
    return warnings


def plan_run(request: RunRequest, flow_run_id: str | None = None) -> RunPlan:
    """The plan of ``request``: a new run's row (or a shard's claim) written, or a resumed
    run's state read back."""
    spec = checked_shard(request.shard, request.run_id, request.resume)
    store = Store(request.db, request.data_path)
    store.migrate()
    if request.resume:
        return _resume_plan(store, request, flow_run_id)
    plan, record = _new_run(store, spec, request, flow_run_id)
    if spec is None:
        if isinstance(store.path, Path):
            # from its first moment: a --resume of it is refused while this process lives
            _claim(store, record.run_id, "run")
        store.create_run(record)
        if isinstance(store.path, Path):  # what --resume rebuilds a deleted store from
            write_run_header(journal_path(store.path, record.run_id), record)
        return plan
    return _join_shard(plan, record, spec, request.take_over)


def _new_run(
    store: Store, spec: ShardSpec | None, request: RunRequest, flow_run_id: str | None
) -> tuple[RunPlan, RunRecord]:
    """The plan of a new run (or shard) and the run row it would write; nothing written."""
    panel_spec = requested_panel(request)
    chunk_size = chunk_size_for(request.chunk_size, panel_spec)
    check_keys(panel_spec)
    dataset_path = Path(request.dataset) if request.dataset else BUNDLED_DATASET
    if not dataset_path.is_file():
        raise RunSetupError(f"dataset {dataset_path} does not exist")
    effective_quorum = request.quorum_for(panel_spec)
    rule = consensus_rule_for(store, panel_spec, request.calibration)
    run_id = request.run_id or new_run_id()
    plan = RunPlan(
        run_id=run_id,
        store=store,
        panel=panel_spec,
        dataset=dataset_path.resolve(),
        mapping=dict(request.mapping),
        quorum=effective_quorum,
        chunk_size=chunk_size,
        max_chars=request.max_chars,
        use_cache=request.use_cache,
        resumed=False,
        rule=rule,
        limit=request.limit,
        sample=request.sample,
        seed=request.seed,
        shard=spec,
    )
    _check_span_texts_of(plan)
    record = RunRecord(
        run_id=run_id,
        kind="evaluate",
        suite=request.suite or f"{dataset_path.stem}:{panel_spec.name}",
        status="running",
        started_at=datetime.now(UTC),
        finished_at=None,
        dataset=str(plan.dataset),
        panel_name=panel_spec.name,
        panel=public_panel(panel_spec),
        prompts=[t.record() for t in plan.templates],
        quorum=effective_quorum,
        n_judges=len(panel_spec.judges),
        parameters={
            "mapping": plan.mapping,
            "chunk_size": chunk_size,
            "max_chars": request.max_chars,
            "use_cache": request.use_cache,
            "calibration": request.calibration,
            "limit": request.limit,
            "sample": request.sample,
            "seed": request.seed,
            **({"shards": spec.count} if spec else {}),
        },
        flow_run_id=flow_run_id,
        consensus=rule.to_dict(),
        dataset_fingerprint=dataset_fingerprint(plan.dataset),
    )
    return plan, record


def preflight_shard(request: RunRequest) -> list[str]:
    """What joining a sharded run checks, before Prefect starts: the shard agrees with the
    run as its first shard stored it, and no live process holds it. Returns warnings to
    show (a lapsed claim taken over)."""
    spec = checked_shard(request.shard, request.run_id, None)
    run_id = request.run_id
    assert spec is not None and run_id is not None
    try:
        lease_seconds()  # a bad setting is told now, not by the flow
    except ShardError as error:
        raise RunSetupError(str(error)) from None
    store = Store(request.db)
    store.migrate()
    stored = store.get_run(run_id)
    if stored is None:
        return []  # this shard will create it
    plan, record = _new_run(store, spec, request, flow_run_id=None)
    _check_joinable(plan, stored, record, spec)
    try:
        taken_over = check_claim(store, run_id, spec, take_over=request.take_over)
    except ShardError as error:
        raise RunSetupError(str(error)) from None
    return [taken_over] if taken_over else []


def _check_joinable(plan: RunPlan, stored: RunRecord, record: RunRecord, spec: ShardSpec) -> None:
    differences = _shard_differences(stored, record)
    if differences:
        raise RunSetupError(
            f"shard {spec} of run {plan.run_id}: {'; '.join(differences)}; every shard of "
            "a run is started with the same dataset, panel and options"
        )


# What every shard of a run must have been started with alike.
_SHARD_ALIKE = ("mapping", "max_chars", "use_cache", "calibration", "limit", "sample", "seed")


def _join_shard(plan: RunPlan, record: RunRecord, spec: ShardSpec, take_over: bool) -> RunPlan:
    """Create the sharded run (first shard) or join it (the others), then claim the shard."""
    if plan.rule.needs_fit:
        raise RunSetupError(
            f"the consensus rule {plan.rule.name} is fitted over the whole run, which a shard "
            "does not see: run the shards with another rule, then `juryflow reaggregate RUN "
            "--consensus ...` once they are finished"
        )
    store, run_id = plan.store, plan.run_id
    try:
        stored = create_or_join(store, record, spec)
        if stored is not None:
            _check_joinable(plan, stored, record, spec)
            parameters = stored.parameters or {}
            # Chunks as the first shard cut them; the run's stored settings otherwise.
            plan = replace(
                plan,
                resumed=True,
                chunk_size=int(parameters.get("chunk_size") or RECORDED_BEFORE_CHUNK_SIZE),
            )
        lease = claim_shard(store, run_id, spec, take_over=take_over)
    except ShardError as error:
        raise RunSetupError(str(error)) from None
    return replace(plan, lease=lease)


def _shard_differences(stored: RunRecord, given: RunRecord) -> list[str]:
    if stored.kind != "evaluate":
        return [f"run {stored.run_id} is a {stored.kind} run, not a sharded evaluation"]
    found: list[str] = []
    given = replace(
        given,
        panel=_as_stored(given.panel),
        parameters=_as_stored(given.parameters),
        consensus=_as_stored(given.consensus),
    )
    kept, new = stored.parameters or {}, given.parameters or {}
    if kept.get("shards") != new.get("shards"):
        found.append(f"it was started with {kept.get('shards') or 'no'} shards")
    if stored.dataset_fingerprint != given.dataset_fingerprint:
        found.append("the dataset differs (size or SHA-256) from the one the run started with")
    if stored.panel != given.panel:
        found.append(f"the panel differs from the run's ({stored.panel_name})")
    if stored.consensus != given.consensus:
        found.append("the consensus rule differs")
    found += [f"--{name} differs" for name in _SHARD_ALIKE if kept.get(name) != new.get(name)]
    return found


def _check_span_texts_of(plan: RunPlan) -> None:
    """``check_span_texts`` for a flow called without the command line's preflight."""
    from juryflow.storage.datasets import DatasetError, dataset_columns, resolve_columns

    try:
        columns = resolve_columns(
            dataset_columns(plan.dataset), plan.needed_variables, plan.mapping
        )
    except DatasetError:
        return  # reading the items reports it, as a row error or a failed run, as before
    check_span_texts(plan.panel, columns.variables)


def _resumable(store: Store, run_id: str) -> tuple[RunRecord, PanelSpec, list[str]]:
    """The run, its panel and warnings, once everything a resume needs is checked:
    the run exists and is an evaluation, the panel's keys are set, the dataset is the one
    the run read, and the journal names only the panel's judges."""
    from juryflow.planning.resume_checks import ResumeError, check_dataset, set_aside_unknown_judges

    run = store.get_run(run_id)
    if run is None:
        raise RunSetupError(f"--resume {run_id}: no such run in {store.path}")
    if run.kind == "import":
        raise RunSetupError(
            f"--resume {run_id}: an imported run (`juryflow import`) has nothing to resume: "
            "its judges are recorded and cannot be called"
        )
    if run.kind != "evaluate":
        raise RunSetupError(f"--resume {run_id}: a {run.kind} run cannot be resumed")
    if (run.parameters or {}).get("shards"):
        raise RunSetupError(
            f"--resume {run_id}: a sharded run continues shard by shard; run `juryflow run "
            f"DATASET --shard I/N --run-id {run_id}` again for each unfinished one "
            "(`juryflow finish` names them)"
        )
    if isinstance(store.path, Path):
        # Before anything is changed (the journal is rewritten just below): one process
        # resumes a run at a time, or both pay for the same calls.
        _claim(store, run_id, "resume")
    panel_spec = _pinned_prompts(parse_panel(run.panel, f"run {run_id}"), run)
    check_keys(panel_spec)
    try:
        warnings = check_dataset(run) + _prompt_file_warnings(panel_spec)
        judges = {j.id for j in panel_spec.judges}
        warnings += set_aside_unknown_judges(store.path, run_id, judges)
    except ResumeError as error:
        raise RunSetupError(str(error)) from None
    return run, panel_spec, warnings


def _claim(store: Store, run_id: str, role: str) -> None:
    """This process's hold on the run (see :mod:`juryflow.storage.store.liveness`);
    RunSetupError naming the process that judges it now."""
    from juryflow.storage.store.liveness import RunHeld, claim

    assert isinstance(store.path, Path)
    try:
        claim(store.path, run_id, role)
    except RunHeld as held:
        raise RunSetupError(str(held)) from None


def _pinned_prompts(panel: PanelSpec, run: RunRecord) -> PanelSpec:
    """The panel with each catalogue prompt at the version the run started with: a run
    begun before a new version became the default (``data2txt_spans`` v1, now v2) is
    resumed with the prompt its judgments answered, not a mix of both."""
    versions = {
        str(record.get("name")): record.get("version")
        for record in run.prompts or ()
        if isinstance(record, dict) and isinstance(record.get("version"), int)
    }
    judges = []
    for judge in panel.judges:
        prompt = judge.prompt
        if prompt and not judge.prompt_file and "@v" not in prompt and prompt in versions:
            judge = judge.model_copy(update={"prompt": f"{prompt}@v{versions[prompt]}"})
        judges.append(judge)
    return panel.model_copy(update={"judges": tuple(judges)})


def _prompt_file_warnings(panel: PanelSpec) -> list[str]:
    """A resume judges with the prompt text stored with the run, so every judgment of the
    run answers the same prompt; an edited prompt file is named, not silently mixed in."""
    from juryflow.prompts.files import changed_since

    warnings: list[str] = []
    for judge in panel.judges:
        if judge.prompt_text is None or judge.prompt is None:
            continue
        change = changed_since(judge.prompt, judge.prompt_text)
        if change is not None:
            warnings.append(
                f"judge {judge.id}: {change}; the resume uses the run's stored prompt text "
                "(start a new run to judge with the edited file)"
            )
    return warnings


def _resume_plan(store: Store, request: RunRequest, flow_run_id: str | None) -> RunPlan:
    run_id = request.resume
    assert run_id is not None
    chunk_size, use_cache = request.chunk_size, request.use_cache
    run, panel_spec, warnings = _resumable(store, run_id)
    for warning in warnings:  # the command line showed them already; flows called directly
        logger.warning(warning)
    parameters = run.parameters or {}
    store.mark_running(run_id, flow_run_id)
    return RunPlan(
        run_id=run_id,
        store=store,
        panel=panel_spec,
        dataset=Path(run.dataset or ""),
        mapping=dict(parameters.get("mapping") or {}),
        quorum=run.quorum,
        # The recorded chunk size keeps chunk boundaries, and so task names, as they were.
        chunk_size=int(parameters.get("chunk_size") or chunk_size or RECORDED_BEFORE_CHUNK_SIZE),
        max_chars=int(parameters.get("max_chars") or DEFAULT_MAX_CHARS),
        # The run's own choice: --no-cache on a resume is refused, not half applied.
        use_cache=bool(parameters.get("use_cache", use_cache)),
        resumed=True,
        # The same items as the run started with: the dataset's fingerprint is checked.
        limit=parameters.get("limit"),
        sample=parameters.get("sample"),
        seed=int(parameters.get("seed") or 0),
        # The rule the run started with, so resumed chunks agree with the stored ones.
        rule=(
            ConsensusRule.from_dict(run.consensus).resolve(panel_spec.all_span_judges)
            if run.consensus
            else panel_spec.consensus_rule()
        ),
    )
