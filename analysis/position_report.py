"""Each pairwise judge's position flips and position bias, from its two orders.

Wiring only: a pairwise judge's two orders are its two samples (sample 0 with answer A shown
first, sample 1 with B first, stored in the original labels), read by
:func:`juryflow.storage.reads.sample_inputs.load_samples`; the figures come from
:mod:`juryflow.maths.pairwise.position`, with intervals that resample whole sources
(:func:`juryflow.storage.reads.bias_inputs.bias_inputs`). The result is part of
:class:`juryflow.analysis.agreement_report.AgreementReport` (``position``), so every face
shows the same numbers.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from juryflow.maths.pairwise.position import Rate, flip_rates, position_bias
from juryflow.maths.pairwise.records import MISSING, TIE, A, B, mirror
from juryflow.storage.reads.bias_inputs import bias_inputs
from juryflow.storage.reads.sample_inputs import load_samples
from juryflow.storage.store import Store

__all__ = ["JudgePosition", "ShareInterval", "judge_positions", "preference_codes"]


class ShareInterval(BaseModel):
    """A share with its 95 % interval (sources resampled); None where nothing counted."""

    model_config = ConfigDict(frozen=True)

    value: float | None
    low: float | None
    high: float | None
    count: int
    of: int

    @classmethod
    def of_rate(cls, rate: Rate) -> ShareInterval:
        def finite(x: float) -> float | None:
            return float(x) if np.isfinite(x) else None

        return cls(
            value=finite(rate.estimate),
            low=finite(rate.low),
            high=finite(rate.high),
            count=rate.successes,
            of=rate.trials,
        )

    def show(self) -> str:
        if self.value is None:
            return "n/a"
        interval = (
            "" if self.low is None or self.high is None else (f" [{self.low:.0%}, {self.high:.0%}]")
        )
        return f"{self.value:.0%}{interval} ({self.count}/{self.of})"


class JudgePosition(BaseModel):
    """One pairwise judge in both orders."""

    model_config = ConfigDict(frozen=True)

    judge_id: str
    flip_rate: ShareInterval
    """Items answered in both orders whose two verdicts disagree (mapped back): ``inconsistent``."""
    first_shown: ShareInterval
    """Of its non-tie answers, both orders pooled, the share picking the answer shown first
    (0.5: no position bias)."""


def preference_codes(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.int8]:
    """Stored preference scores (B's share of the win; NaN unanswered) as verdict codes."""
    codes = np.full(scores.shape, MISSING, dtype=np.int8)
    codes[scores == 0.0] = A
    codes[scores == 0.5] = TIE
    codes[scores == 1.0] = B
    return codes


def judge_positions(store: Store, run_id: str, n_items: int) -> list[JudgePosition]:
    """Every pairwise judge of the run (none in other runs)."""
    pairwise = [
        s for s in load_samples(store, run_id, n_items)
        if s.output_kind == "preference" and s.scores.shape[0] == 2
    ]  # fmt: skip
    if not pairwise:
        return []
    groups = np.asarray(bias_inputs(store, run_id).groups, dtype=object)
    first = np.stack([preference_codes(s.scores[0]) for s in pairwise])
    # Sample 1 is stored in the original labels: in the order shown, A and B swap.
    shown_second = np.stack([mirror(preference_codes(s.scores[1])) for s in pairwise])
    flips = flip_rates(first, shown_second, groups=groups)
    bias = position_bias(first, shown_second, groups=groups)
    return [
        JudgePosition(
            judge_id=s.judge_id,
            flip_rate=ShareInterval.of_rate(f),
            first_shown=ShareInterval.of_rate(b),
        )
        for s, f, b in zip(pairwise, flips, bias, strict=True)
    ]
