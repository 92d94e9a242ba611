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

import warnings
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from juryflow.maths.pairwise.position import (
    Rate,
    flip_rates,
    human_agreement,
    panel_kappa,
    position_bias,
)
from juryflow.maths.pairwise.records import (
    MISSING,
    TIE,
    A,
    B,
    item_verdicts,
    mirror,
    parse_verdicts,
)
from juryflow.storage.reads.bias_inputs import bias_inputs
from juryflow.storage.reads.pairwise_inputs import pairwise_inputs
from juryflow.storage.reads.sample_inputs import load_samples
from juryflow.storage.store import Store

__all__ = [
    "Estimate",
    "JudgePosition",
    "Orders",
    "ShareInterval",
    "judge_positions",
    "load_orders",
    "preference_codes",
]


class Estimate(BaseModel):
    """A figure with its 95 % interval (sources resampled); None where not defined."""

    model_config = ConfigDict(frozen=True)

    value: float | None
    low: float | None
    high: float | None

    @classmethod
    def from_figures(cls, value: float, low: float, high: float) -> Estimate:
        def finite(x: float) -> float | None:
            return float(x) if np.isfinite(x) else None

        return cls(value=finite(value), low=finite(low), high=finite(high))

    def show(self, percent: bool = True) -> str:
        if self.value is None:
            return "n/a"

        def fmt(x: float) -> str:
            return f"{x:.0%}" if percent else f"{x:+.2f}"

        if self.low is None or self.high is None:
            return fmt(self.value)
        return f"{fmt(self.value)} [{fmt(self.low)}, {fmt(self.high)}]"


class ShareInterval(Estimate):
    """A share of counted cases, with its interval and the counts."""

    count: int
    of: int

    @classmethod
    def of_rate(cls, rate: Rate) -> ShareInterval:
        found = Estimate.from_figures(rate.estimate, rate.low, rate.high)
        return cls(**found.model_dump(), count=rate.successes, of=rate.trials)

    def show(self, percent: bool = True) -> str:
        shown = super().show(percent)
        return shown if self.value is None else f"{shown} ({self.count}/{self.of})"


class JudgePosition(BaseModel):
    """One pairwise judge in both orders."""

    model_config = ConfigDict(frozen=True)

    judge_id: str
    flip_rate: ShareInterval
    """Items answered in both orders whose two verdicts disagree (mapped back): ``inconsistent``."""
    first_shown: ShareInterval
    """Of its non-tie answers, both orders pooled, the share picking the answer shown first
    (0.5: no position bias)."""
    kappa_with_judges: float | None = None
    """Its mean Cohen κ (A, B and tie as classes) with the other pairwise judges, each pair
    over the items where both verdicts are consistent."""
    human_kappa: float | None = None
    """Cohen's κ (A, B and tie as classes) with the items' human preference (``preferred``),
    over the items where its verdict is consistent and a human gave one."""
    human_items: int = 0


def preference_codes(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.int8]:
    """Stored preference scores (B's share of the win; NaN unanswered) as verdict codes."""
    codes = np.full(scores.shape, MISSING, dtype=np.int8)
    codes[scores == 0.0] = A
    codes[scores == 0.5] = TIE
    codes[scores == 1.0] = B
    return codes


@dataclass(frozen=True, slots=True)
class Orders:
    """The pairwise judges' raw verdicts, ``(n_judges, n_items)`` codes in the order shown."""

    judge_ids: tuple[str, ...]
    first: npt.NDArray[np.int8]
    """A shown first."""
    second: npt.NDArray[np.int8]
    """B shown first, as the judge said it (its "A" is the original B)."""


def load_orders(store: Store, run_id: str, n_items: int) -> Orders | None:
    """Every pairwise judge's two orders (None for a run without one)."""
    pairwise = [
        s for s in load_samples(store, run_id, n_items)
        if s.output_kind == "preference" and s.scores.shape[0] == 2
    ]  # fmt: skip
    if not pairwise:
        return None
    return Orders(
        judge_ids=tuple(s.judge_id for s in pairwise),
        first=np.stack([preference_codes(s.scores[0]) for s in pairwise]),
        # Sample 1 is stored in the original labels: in the order shown, A and B swap.
        second=np.stack([mirror(preference_codes(s.scores[1])) for s in pairwise]),
    )


def judge_positions(store: Store, run_id: str, orders: Orders | None) -> list[JudgePosition]:
    """Every pairwise judge of the run, from its :func:`load_orders` (none in other runs)."""
    if orders is None:
        return []
    groups = np.asarray(bias_inputs(store, run_id).groups, dtype=object)
    flips = flip_rates(orders.first, orders.second, groups=groups)
    bias = position_bias(orders.first, orders.second, groups=groups)
    human = parse_verdicts(pairwise_inputs(store, run_id).preferred)
    labelled = bool((human != MISSING).any())
    items = item_verdicts(orders.first, orders.second)
    versus = human_agreement(items, human, orders.judge_ids)
    kappas = panel_kappa(items)
    np.fill_diagonal(kappas, np.nan)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a judge with no defined pair: NaN
        mean_kappa = np.nanmean(kappas, axis=1) if len(kappas) > 1 else np.full(1, np.nan)
    return [
        JudgePosition(
            judge_id=judge_id,
            flip_rate=ShareInterval.of_rate(f),
            first_shown=ShareInterval.of_rate(b),
            human_kappa=(
                float(versus[judge_id].kappa)
                if labelled and np.isfinite(versus[judge_id].kappa)
                else None
            ),
            human_items=versus[judge_id].n_items if labelled else 0,
            kappa_with_judges=float(k) if np.isfinite(k) else None,
        )
        for judge_id, f, b, k in zip(orders.judge_ids, flips, bias, mean_kappa, strict=True)
    ]
