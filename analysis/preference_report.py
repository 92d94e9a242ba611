"""What a pairwise panel preferred: answer B against answer A head to head, and each
candidate model's Bradley–Terry strength.

Wiring only: the panel's consensus per item and the candidates' names come from
:mod:`juryflow.storage.reads.pairwise_inputs`, every judge's verdicts in both orders from
:func:`.position_report.load_orders`; the figures from :mod:`juryflow.maths.pairwise`
(``head_to_head``, ``fit_bradley_terry``), with intervals that resample whole sources. The
result is part of :class:`juryflow.analysis.agreement_report.AgreementReport`
(``preference``), so every face shows the same numbers.

Head to head, B is the candidate and A the baseline (a regression's pairs put the baseline's
answer first): B's **win share** is its wins plus half its ties; 0.5 is "as good as A", and
B regressed when the interval's upper end is below it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from juryflow.analysis.position_report import Estimate, Orders
from juryflow.maths.agreement import error_correlation_report
from juryflow.maths.pairwise.bradley_terry import comparisons, fit_bradley_terry
from juryflow.maths.pairwise.head_to_head import (
    HeadToHead,
    Share,
    head_to_head,
    passes_aa,
    regressed,
)
from juryflow.maths.pairwise.records import (
    INCONSISTENT,
    MISSING,
    TIE,
    A,
    B,
    item_verdicts,
    parse_verdicts,
)
from juryflow.maths.regression_stats import HeadToHead as GateHeadToHead
from juryflow.storage.reads.bias_inputs import bias_inputs
from juryflow.storage.reads.pairwise_inputs import pairwise_inputs
from juryflow.storage.store import Store

__all__ = [
    "Estimate",
    "ModelStrength",
    "PreferenceSummary",
    "gate_figures",
    "preference_summary",
]


class ModelStrength(BaseModel):
    model_config = ConfigDict(frozen=True)

    model: str
    strength: Estimate
    """Bradley–Terry log-ability, centred on 0 over the models."""
    comparisons: int
    """Comparisons it took part in (judges × orders × items)."""


class PreferenceSummary(BaseModel):
    """B (the candidate) against A (the baseline) over the items with a consensus."""

    model_config = ConfigDict(frozen=True)

    items: int
    """Items with a consensus (A, B or tie)."""
    without_consensus: int
    wins: Estimate
    ties: Estimate
    losses: Estimate
    win_share: Estimate
    """B's wins plus half its ties: 0.5 is "as good as A"."""
    regressed: bool
    """The win share's interval lies below 0.5: B is worse than A beyond the noise."""
    balanced: bool
    """The win share's interval holds 0.5 (what an A/A run, A against itself, must show)."""
    strengths: list[ModelStrength] = []
    """Per candidate model named by ``model_a`` / ``model_b``, strongest first."""
    position: Estimate | None = None
    """The first-shown answer's log-odds advantage in the Bradley–Terry fit."""
    effective_panel_size: float | None = None
    """How many independent judges the panel's errors against the human preference are
    worth (Kish's design effect over their error correlation); None without labels."""


def _share(share: Share) -> Estimate:
    return Estimate.from_figures(share.estimate, share.low, share.high)


def consensus_codes(consensus: npt.NDArray[np.float64]) -> npt.NDArray[np.int8]:
    """The panel's preference per item as a code (A below 0.5, tie at it, B above)."""
    codes = np.full(consensus.shape, MISSING, dtype=np.int8)
    codes[consensus < 0.5] = A
    codes[consensus == 0.5] = TIE
    codes[consensus > 0.5] = B
    return codes


def run_preference_summary(store: Store, run_id: str) -> PreferenceSummary | None:
    """:func:`preference_summary` of a run read on its own (no report loaded its orders)."""
    from juryflow.analysis.position_report import load_orders

    return preference_summary(
        store, run_id, load_orders(store, run_id, len(store.item_ids(run_id)))
    )


def preference_summary(
    store: Store, run_id: str, orders: Orders | None
) -> PreferenceSummary | None:
    """The run's head-to-head and strengths, from its :func:`load_orders` (None for a run
    without pairwise judges)."""
    if orders is None:
        return None
    inputs = pairwise_inputs(store, run_id)
    groups = np.asarray(bias_inputs(store, run_id).groups, dtype=object)
    result: HeadToHead = head_to_head(consensus_codes(inputs.consensus), groups=groups)
    summary = PreferenceSummary(
        items=result.n_items,
        without_consensus=result.n_missing,
        wins=_share(result.wins),
        ties=_share(result.ties),
        losses=_share(result.losses),
        win_share=_share(result.win_share),
        regressed=regressed(result),
        balanced=passes_aa(result),
    )
    human = parse_verdicts(inputs.preferred)
    if (human != MISSING).any() and len(orders.judge_ids) > 1:
        items = item_verdicts(orders.first, orders.second)
        known = (items != MISSING) & (items != INCONSISTENT) & (human != MISSING)
        wrong = np.where(known, (items != human).astype(np.float64), np.nan)
        # Error indicators against an all-zero "gold" are their own indicators: the verdict
        # maths' error correlation then applies to three classes unchanged.
        errors = error_correlation_report(wrong, np.zeros(wrong.shape[1]))
        if np.isfinite(errors.effective_size):
            summary = summary.model_copy(
                update={"effective_panel_size": float(errors.effective_size)}
            )
    named = (inputs.model_a >= 0) & (inputs.model_b >= 0) & (inputs.model_a != inputs.model_b)
    if len(inputs.models) < 2 or not named.any():
        return summary
    found = comparisons(
        inputs.model_a[named],
        inputs.model_b[named],
        orders.first[:, named],
        orders.second[:, named],
        n_models=len(inputs.models),
    )
    fit = fit_bradley_terry(found, groups=groups[named])
    counts = np.bincount(found.first, minlength=found.n_models) + np.bincount(
        found.second, minlength=found.n_models
    )
    strengths = [
        ModelStrength(
            model=inputs.models[k],
            strength=Estimate.from_figures(
                float(fit.strengths[k]), float(fit.strengths_low[k]), float(fit.strengths_high[k])
            ),
            comparisons=int(counts[k]),
        )
        for k in fit.ranking().tolist()
    ]
    position = Estimate.from_figures(fit.position, fit.position_low, fit.position_high)
    return summary.model_copy(update={"strengths": strengths, "position": position})


def gate_figures(summary: PreferenceSummary, aa: PreferenceSummary | None = None) -> GateHeadToHead:
    """What the regression gate reads of a head-to-head (and its A/A run)."""

    def value(x: float | None) -> float:
        return float("nan") if x is None else x

    return GateHeadToHead(
        win_share=value(summary.win_share.value),
        low=value(summary.win_share.low),
        high=value(summary.win_share.high),
        items=summary.items,
        regressed=summary.regressed,
        aa_win_share=None if aa is None else aa.win_share.value,
        aa_balanced=None if aa is None else aa.balanced,
    )
