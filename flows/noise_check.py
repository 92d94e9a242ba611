"""The A/A check of a regression: re-judge a seeded sample of the baseline's items with the
baseline's own panel, cache off, and measure what the judges' noise alone changes.

The re-judge is an ordinary `evaluate` run (a subflow) of the baseline's dataset, stored
under its own suite, ``<baseline suite>~aa``, so that it is never a regression's baseline.
Its items pair with the baseline's; the paired differences are the
:class:`juryflow.maths.noise.noise_floor.NoiseSample` the gate's floor is computed from.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from juryflow.flows.evaluate import evaluate
from juryflow.judges.panel import PanelError, load_panel
from juryflow.judges.redact import MASK
from juryflow.maths.noise.noise_floor import NoiseSample, noise_sample
from juryflow.planning.run_request import RunRequest
from juryflow.storage.comparisons import load_run_scores
from juryflow.storage.datasets import DEFAULT_MAX_CHARS, DatasetError, dataset_fingerprint
from juryflow.storage.store import RunRecord, Store

AA_SUFFIX = "~aa"
"""The A/A runs' suite is the baseline's with this suffix."""


class NoiseCheckError(ValueError):
    """The A/A check cannot re-judge the baseline as it was judged."""


@dataclass(frozen=True, slots=True)
class NoiseCheck:
    run_id: str
    """The A/A re-judge's run."""
    baseline_run_id: str
    sample: NoiseSample


def _same_panel(panel: str | None, baseline: RunRecord) -> bool:
    try:
        return load_panel(panel).public_dict() == baseline.panel
    except PanelError:
        return False


def _unrunnable(stored: dict[str, Any]) -> list[str]:
    """Why the stored copy of a panel cannot be run as it is (nothing: it can)."""
    reasons: list[str] = []
    for judge in stored.get("judges", []):
        if judge.get("provider") == "recorded":
            reasons.append(f"judge {judge.get('id')} is recorded (imported), never called")
        if judge.get("prompt_text") is not None:
            reasons.append(f"judge {judge.get('id')}'s prompt file is stored as its text")
        if judge.get("headers") or MASK in str(judge.get("base_url") or ""):
            reasons.append(f"judge {judge.get('id')}'s header values or URL credentials are masked")
    return reasons


@contextlib.contextmanager
def baseline_panel(panel: str | None, baseline: RunRecord) -> Iterator[str | None]:
    """A panel file that judges as the baseline did: ``panel`` when it is the baseline's
    panel (it holds what the stored copy masks), else the stored copy in a temporary file.
    Raises :class:`NoiseCheckError` when neither can be used."""
    if _same_panel(panel, baseline):
        yield panel
        return
    reasons = _unrunnable(baseline.panel)
    if reasons:
        raise NoiseCheckError(
            f"the A/A check re-judges with baseline {baseline.run_id}'s panel "
            f"({baseline.panel_name}), not the one given, and its stored copy cannot be run "
            f"({'; '.join(reasons)}): pass that panel's file with --panel, or drop --noise-floor"
        )
    with tempfile.TemporaryDirectory(prefix="juryflow-aa-") as directory:
        path = Path(directory) / "baseline-panel.yaml"
        path.write_text(yaml.safe_dump(runnable_copy(baseline.panel), sort_keys=False), "utf-8")
        yield str(path)


def runnable_copy(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored panel as a panel file may say it: the loader refuses ``prompt_text`` (juryflow
    fills it in), which a judge without a prompt file stores as None."""
    judges = [
        {k: v for k, v in judge.items() if not (k == "prompt_text" and v is None)}
        for judge in stored.get("judges", [])
    ]
    return {**stored, "judges": judges}


def _check_same_dataset(baseline: RunRecord) -> None:
    """The re-judged items must be the texts the baseline judged: a dataset changed since
    would pair different texts by id, and their differences would not be noise."""
    if baseline.dataset_fingerprint is None:
        return  # a run from before fingerprints: nothing to check against
    try:
        now = dataset_fingerprint(str(baseline.dataset))
    except DatasetError as error:
        raise NoiseCheckError(
            f"the A/A check cannot read the baseline's dataset: {error}"
        ) from None
    if now != baseline.dataset_fingerprint:
        raise NoiseCheckError(
            f"the A/A check re-judges baseline {baseline.run_id}'s items, but its dataset "
            f"{baseline.dataset} changed since (its SHA-256 differs): pin a baseline judged on "
            "this file with --baseline RUN, or drop --noise-floor"
        )


async def noise_check(
    store: Store, request: RunRequest, baseline_run_id: str, *, sample: int, seed: int
) -> NoiseCheck:
    """Re-judge ``sample`` items of the baseline (drawn with ``seed``) with its panel (or
    the request's), cache off, and pair the re-judge with the baseline; the request gives
    the store and ``batch``."""
    baseline = store.get_run(baseline_run_id)
    if baseline is None:
        raise NoiseCheckError(f"baseline {baseline_run_id}: no such run in {store.path}")
    if not baseline.dataset or not Path(baseline.dataset).is_file():
        raise NoiseCheckError(
            f"the A/A check re-judges baseline {baseline_run_id}'s items, but its dataset "
            f"{baseline.dataset} is not there: restore it, or drop --noise-floor"
        )
    _check_same_dataset(baseline)
    parameters = baseline.parameters or {}
    with baseline_panel(request.panel, baseline) as panel_file:
        rejudge = RunRequest(
            dataset=baseline.dataset,
            panel=panel_file,
            db=request.db,
            suite=f"{baseline.suite}{AA_SUFFIX}",
            quorum=baseline.quorum,
            mapping=parameters.get("mapping") or {},
            max_chars=int(parameters.get("max_chars") or DEFAULT_MAX_CHARS),
            calibration=parameters.get("calibration"),
            use_cache=False,  # the point: the judges answer again
            sample=sample,
            seed=seed,
            batch=request.batch,
        )
        summary: dict[str, Any] = await evaluate(rejudge)
    run_id = str(summary["run_id"])
    before, after = load_run_scores(store, baseline_run_id), load_run_scores(store, run_id)
    judged = set(after.consensus)

    def pick(scores: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in scores.items() if k in judged}

    measured = noise_sample(
        pick(before.consensus),
        after.consensus,
        pick(before.verdicts),
        after.verdicts,
        {j: pick(s) for j, s in before.judges.items()},
        after.judges,
    )
    return NoiseCheck(run_id, baseline_run_id, measured)
