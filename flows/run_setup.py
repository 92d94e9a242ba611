"""Everything a run decides before the first call: dataset, panel, keys, store and run row."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from judges.factory import check_keys
from judges.panel import PanelSpec, load_panel, parse_panel
from prompts.loader import PromptTemplate, load_template
from storage.datasets import DEFAULT_MAX_CHARS
from storage.store import RunRecord, Store, new_run_id

BUNDLED_DATASET = (
    Path(__file__).resolve().parents[1] / "examples" / "ragtruth_data2txt_sample.jsonl"
)
DETECTOR_VARIABLES = ("reference", "response")


class RunSetupError(ValueError):
    pass


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

    @property
    def templates(self) -> list[PromptTemplate]:
        names = dict.fromkeys(j.prompt for j in self.panel.judges if j.prompt)
        return [load_template(name) for name in names if name]

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
        return "response" if "response" in self.needed_variables else self.needed_variables[-1]


def public_panel(panel: PanelSpec) -> dict[str, Any]:
    """The panel as stored with a run: header values could be credentials, so only names."""
    data = panel.model_dump(mode="json")
    for judge in data["judges"]:
        judge["headers"] = {name: "<redacted>" for name in judge.get("headers", {})}
    return data


def preflight(dataset: str | None, panel: str | None, mapping: dict[str, str] | None) -> None:
    """Fail before Prefect starts on what can be checked without it: panel, keys, columns."""
    from storage.datasets import dataset_columns, resolve_columns

    panel_spec = load_panel(panel)
    check_keys(panel_spec)
    dataset_path = Path(dataset) if dataset else BUNDLED_DATASET
    if not dataset_path.is_file():
        raise RunSetupError(f"dataset {dataset_path} does not exist")
    probe = RunPlan(
        run_id="",
        store=Store(":memory:"),
        panel=panel_spec,
        dataset=dataset_path,
        mapping=dict(mapping or {}),
        quorum=panel_spec.effective_quorum,
        chunk_size=1,
        max_chars=DEFAULT_MAX_CHARS,
        use_cache=False,
        resumed=False,
    )
    resolve_columns(dataset_columns(dataset_path), probe.needed_variables, probe.mapping)


def plan_run(
    *,
    dataset: str | None,
    panel: str | None,
    db: str | None,
    resume: str | None,
    suite: str | None,
    chunk_size: int,
    quorum: int | None,
    mapping: dict[str, str] | None,
    use_cache: bool,
    max_chars: int = DEFAULT_MAX_CHARS,
    flow_run_id: str | None = None,
) -> RunPlan:
    store = Store(db)
    store.migrate()
    if resume:
        return _resume_plan(store, resume, chunk_size, use_cache, flow_run_id)
    panel_spec = load_panel(panel)
    check_keys(panel_spec)
    dataset_path = Path(dataset) if dataset else BUNDLED_DATASET
    if not dataset_path.is_file():
        raise RunSetupError(f"dataset {dataset_path} does not exist")
    effective_quorum = quorum or panel_spec.effective_quorum
    if effective_quorum > len(panel_spec.judges):
        raise RunSetupError(
            f"quorum {effective_quorum} is larger than the panel ({len(panel_spec.judges)} judges)"
        )
    run_id = new_run_id()
    plan = RunPlan(
        run_id=run_id,
        store=store,
        panel=panel_spec,
        dataset=dataset_path.resolve(),
        mapping=dict(mapping or {}),
        quorum=effective_quorum,
        chunk_size=chunk_size,
        max_chars=max_chars,
        use_cache=use_cache,
        resumed=False,
    )
    store.create_run(
        RunRecord(
            run_id=run_id,
            kind="evaluate",
            suite=suite or f"{dataset_path.stem}:{panel_spec.name}",
            status="running",
            started_at=datetime.now(UTC),
            finished_at=None,
            dataset=str(plan.dataset),
            panel_name=panel_spec.name,
            panel=public_panel(panel_spec),
            prompts=[
                {"name": t.name, "version": t.version, "sha256": t.sha256} for t in plan.templates
            ],
            quorum=effective_quorum,
            n_judges=len(panel_spec.judges),
            parameters={
                "mapping": plan.mapping,
                "chunk_size": chunk_size,
                "max_chars": max_chars,
                "use_cache": use_cache,
            },
            flow_run_id=flow_run_id,
        )
    )
    return plan


def _resume_plan(
    store: Store, run_id: str, chunk_size: int, use_cache: bool, flow_run_id: str | None
) -> RunPlan:
    run = store.get_run(run_id)
    if run is None:
        raise RunSetupError(f"--resume {run_id}: no such run in {store.path}")
    if run.kind != "evaluate":
        raise RunSetupError(f"--resume {run_id}: a {run.kind} run cannot be resumed")
    panel_spec = parse_panel(run.panel, f"run {run_id}")
    check_keys(panel_spec)
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
        chunk_size=int(parameters.get("chunk_size") or chunk_size),
        max_chars=int(parameters.get("max_chars") or DEFAULT_MAX_CHARS),
        use_cache=use_cache,
        resumed=True,
    )
