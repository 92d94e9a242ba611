"""A regression's figures in words, as the compare page and the HTML report print them."""

from __future__ import annotations

import math
from typing import Any


def figure(value: Any, digits: int = 3) -> str:
    """A regression figure as the HTML report prints it (``.3g``; – when undefined)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def noise_floor_rows(floor: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The A/A check's noise floor the gate held the changes against (none: not run)."""
    if not floor:
        return []
    if floor.get("mean_delta") is None:
        return [("noise floor", f"not measured (A/A check of {floor['aa_items']} items)")]
    drifts = ", ".join(f"{j} {figure(v)}" for j, v in (floor.get("judge_drift") or {}).items())
    return [
        (
            "noise floor of the mean change (A/A check)",
            f"{figure(floor['mean_delta'])} for {floor['n_paired']} items, from "
            f"{floor['aa_items']} baseline items re-judged (false-alarm rate "
            f"{figure(floor['false_alarm_rate'])})",
        ),
        (
            "noise floor of flips / agreement fall / judge drift",
            f"{figure(floor['flips_to_hallucinated'])} / {figure(floor.get('agreement_drop'))}"
            f" / {drifts or '–'}",
        ),
    ]
