"""Is a regression's baseline comparable with the run? One line per reason it may not be.

`juryflow regression` compares with the suite's newest successful run by default. That run
may have judged a ``--limit`` subset (then few items pair, and "no regression" speaks of
them only), or combined the judges by another panel, consensus rule or calibration (then a
change may come from the rule, not from the judges). The comparison still runs; these
warnings say what it is worth.
"""

from __future__ import annotations

from typing import Any

from juryflow.storage.store import RunRecord

PAIRED_SHARE = 0.8
"""Below this share of the run's items paired with the baseline, the pairing is warned of."""

# Judge settings that change how a judge is called, never what it answers.
_PACING = frozenset(
    {
        "api_key_secret",
        "headers",
        "max_concurrency",
        "requests_per_minute",
        "tokens_per_minute",
        "max_attempts",
        "timeout",
        "batch",
    }
)


def baseline_warnings(
    run: RunRecord, baseline: RunRecord, n_items: int, n_paired: int
) -> list[str]:
    """Why ``baseline`` may not be comparable with ``run``, one sentence each (none: it is).

    ``n_items``: the items ``run`` judged; ``n_paired``: those scored in both runs.
    """
    warnings: list[str] = []
    if n_items and n_paired < PAIRED_SHARE * n_items:
        warnings.append(
            f"only {n_paired} of the {n_items} items run {run.run_id} judged pair with "
            f"baseline {baseline.run_id}{_subset(baseline)} ({100 * n_paired / n_items:.0f} %): "
            "the comparison says nothing of the others; pass --baseline RUN to compare with "
            "a run of the same items"
        )
    changed = _changed_judges(run.panel, baseline.panel)
    if changed:
        warnings.append(
            f"baseline {baseline.run_id} judged with another panel ({'; '.join(changed)}): "
            "a change may come from the panel, not from the judges' answers"
        )
    ours, theirs = _calibration(run), _calibration(baseline)
    if ours != theirs:
        warnings.append(
            f"baseline {baseline.run_id} used {_named(theirs)}, run {run.run_id} "
            f"{_named(ours)}: the consensus may differ by the rule alone"
        )
    elif differs := _rule_differences(baseline, run):
        warnings.append(
            f"baseline {baseline.run_id} made its consensus by another rule "
            f"({'; '.join(differs)}): the consensus may differ by the rule alone"
        )
    return warnings


def _subset(run: RunRecord) -> str:
    parameters = run.parameters or {}
    chosen = [f"--{key} {parameters[key]}" for key in ("limit", "sample") if parameters.get(key)]
    return f" (a {' '.join(chosen)} run)" if chosen else ""


def _judges(panel: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        str(judge.get("id")): {k: v for k, v in judge.items() if k not in _PACING}
        for judge in panel.get("judges", [])
    }


def _changed_judges(now: dict[str, Any], before: dict[str, Any]) -> list[str]:
    ours, theirs = _judges(now), _judges(before)
    parts = []
    if added := sorted(ours.keys() - theirs.keys()):
        parts.append(f"judges added: {', '.join(added)}")
    if removed := sorted(theirs.keys() - ours.keys()):
        parts.append(f"judges removed: {', '.join(removed)}")
    if changed := sorted(j for j in ours.keys() & theirs.keys() if ours[j] != theirs[j]):
        parts.append(f"judges configured otherwise: {', '.join(changed)}")
    return parts


def _calibration(run: RunRecord) -> str | None:
    value = (run.parameters or {}).get("calibration")
    return None if value is None else str(value)


def _named(calibration: str | None) -> str:
    return "no calibration" if calibration is None else f"calibration {calibration!r}"


def _rule_differences(before: RunRecord, now: RunRecord) -> list[str]:
    """Each part of the rule (and the quorum) that differs: ``spans union, now majority``."""
    # the rule's name is the calibration's, compared on its own
    old = {k: v for k, v in (before.consensus or {}).items() if k != "name"}
    new = {k: v for k, v in (now.consensus or {}).items() if k != "name"}
    old["quorum"], new["quorum"] = before.quorum, now.quorum
    return [
        f"{key} {_short(old.get(key))}, now {_short(new.get(key))}"
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]


def _short(value: Any) -> str:
    text = "default" if value is None else str(value)
    return text if len(text) <= 40 else text[:39] + "…"
