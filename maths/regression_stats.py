"""Compare a run with its baseline, item by item: pure statistics, no I/O.

Every comparison pairs the two runs by item id and only uses items both runs scored:

- the consensus score change: mean and median paired difference, a Wilcoxon signed-rank
  test of "no change" and a percentile bootstrap interval of the mean difference;
- verdict flips in each direction (clean -> hallucinated, hallucinated -> clean);
- each judge's drift: the mean paired difference of its own scores;
- the change in agreement (Krippendorff's interval alpha over the paired items).

:func:`check_thresholds` turns a :class:`Comparison` into the list of what regressed, each
entry a sentence a person can act on; an empty list means the run passed. :func:`gate_notes`
lists the checks that could not be applied, such as the mean-increase gate on a suite too
small for the Wilcoxon test ever to be significant (n <= 5 changed items at alpha 0.05).

With a measured noise floor (:mod:`juryflow.maths.noise.noise_floor`, from an A/A check
in ``Thresholds.noise_floor``) the mean, flips, drift and agreement checks count only what lies
beyond the judges' own noise; a suite whose floor is above a threshold is too small to
tell a change of that size from noise, and :func:`gate_notes` says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from juryflow.maths.agreement import krippendorff_alpha
from juryflow.maths.noise.noise_floor import NoiseFloor

FloatArray = npt.NDArray[np.float64]
Scores = Mapping[str, float | None]
"""Item id -> score (None when there is none: unscored, insufficient)."""
JudgeScores = Mapping[str, Scores]
"""Judge id -> item id -> score."""


@dataclass(frozen=True, slots=True)
class ScoreChange:
    n_paired: int
    mean_delta: float
    median_delta: float
    statistic: float
    p_value: float
    ci_low: float
    ci_high: float
    n_changed: int | None = None
    """Paired items whose score changed: the Wilcoxon test's n, as it drops zero differences
    (None when unknown, read as ``n_paired``)."""


@dataclass(frozen=True, slots=True)
class JudgeDrift:
    judge_id: str
    drift: float
    """Mean paired ``after - before`` of the judge's scores; NaN with nothing paired."""
    n_paired: int


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When a run counts as regressed. Each check can be switched off with ``None``."""

    max_mean_increase: float | None = 0.05
    """Largest allowed rise of the mean consensus score, when the paired test is significant
    (with too few changed items it never can be: :func:`gate_notes` says so)."""
    max_flips_to_hallucinated: int | None = 3
    """Largest allowed number of items whose verdict went from clean to hallucinated."""
    max_judge_drift: float | None = 0.1
    """Largest allowed absolute mean score change of any single judge."""
    max_agreement_drop: float | None = 0.1
    """Largest allowed fall of Krippendorff's alpha between the judges."""
    p_value_alpha: float = 0.05
    """Significance level of the paired test guarding the mean-increase check."""
    false_alarm_rate: float = 0.05
    """With a noise floor: the chance that two runs judged alike are flagged by any of the
    floored checks (the share of A/A comparisons the gate may flag)."""
    noise_floor: NoiseFloor | None = None
    """The judges' noise floor from an A/A check: the mean, flips and drift checks count
    only beyond it (None: not measured, the thresholds alone)."""

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["noise_floor"] = None if self.noise_floor is None else self.noise_floor.as_dict()
        return data

    def _floor(self) -> NoiseFloor | None:
        floor = self.noise_floor
        return floor if floor is not None and floor.measured else None


@dataclass(frozen=True, slots=True)
class Comparison:
    score: ScoreChange
    flips_to_hallucinated: int
    flips_to_clean: int
    judges: tuple[JudgeDrift, ...]
    agreement_before: float
    agreement_after: float
    flipped_items: dict[str, list[str]] = field(default_factory=dict)
    """``{"to_hallucinated": [...], "to_clean": [...]}``: the item ids of each flip."""

    @property
    def agreement_change(self) -> float:
        return self.agreement_after - self.agreement_before


def paired(before: Scores, after: Scores) -> tuple[list[str], FloatArray, FloatArray]:
    """Item ids present with a score in both runs (sorted), and the two score vectors.

    >>> ids, a, b = paired({"x": 0.1, "y": None, "z": 0.5}, {"z": 0.7, "x": 0.1, "w": 1.0})
    >>> ids, a.tolist(), b.tolist()
    (['x', 'z'], [0.1, 0.5], [0.1, 0.7])
    """
    ids = sorted(k for k, v in before.items() if v is not None and after.get(k) is not None)
    a = np.asarray([before[k] for k in ids], dtype=np.float64)
    b = np.asarray([after[k] for k in ids], dtype=np.float64)
    return ids, a, b


def bootstrap_mean_ci(
    deltas: npt.ArrayLike, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``deltas`` (seeded: reproducible).

    >>> bootstrap_mean_ci([0.2, 0.2, 0.2])
    (0.2, 0.2)
    >>> bootstrap_mean_ci([])
    (nan, nan)
    """
    d = np.asarray(deltas, dtype=np.float64).reshape(-1)
    if d.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(n_resamples, d.size))].mean(axis=1)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return round(float(low), 12), round(float(high), 12)


def paired_score_change(before: npt.ArrayLike, after: npt.ArrayLike) -> ScoreChange:
    """Paired change ``after - before``: mean, median, Wilcoxon signed-rank and bootstrap CI.

    The Wilcoxon test drops zero differences (``zero_method="wilcox"``); when every
    difference is zero nothing changed and the result is statistic 0, p-value 1. With no
    pair at all everything is NaN.

    Differences (+0.5, +0.25, -0.125, +1.0): ranks 3, 2, 1, 4, so W = min(9, 1) = 1 and
    the exact two-sided p-value is 2 * P(W <= 1) = 2 * 2/16 = 0.25:

    >>> c = paired_score_change([0.0, 0.25, 0.5, 0.0], [0.5, 0.5, 0.375, 1.0])
    >>> c.n_paired, c.n_changed, c.mean_delta, c.median_delta, c.statistic, c.p_value
    (4, 4, 0.40625, 0.375, 1.0, 0.25)
    """
    a = np.asarray(before, dtype=np.float64).reshape(-1)
    b = np.asarray(after, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"before and after differ in length: {a.size} vs {b.size}")
    nan = float("nan")
    if a.size == 0:
        return ScoreChange(0, nan, nan, nan, nan, nan, nan, n_changed=0)
    d = b - a
    low, high = bootstrap_mean_ci(d)
    mean, median = float(d.mean()), float(np.median(d))
    changed = int(np.count_nonzero(d))
    if not changed:
        return ScoreChange(int(d.size), mean, median, 0.0, 1.0, low, high, n_changed=0)
    # scipy.stats takes ~0.4 s to import; every run start would pay it for this one call
    from scipy import stats

    result = stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided")
    return ScoreChange(
        n_paired=int(d.size),
        mean_delta=mean,
        median_delta=median,
        statistic=float(result.statistic),
        p_value=float(result.pvalue),
        ci_low=low,
        ci_high=high,
        n_changed=changed,
    )


def min_wilcoxon_p(n: int) -> float:
    """The smallest two-sided p-value the exact Wilcoxon signed-rank test can give with ``n``
    non-zero differences: all of one sign, 2 of the 2**n equally likely sign patterns.

    At alpha 0.05 no suite with 5 or fewer changed items can ever be significant:

    >>> min_wilcoxon_p(5), min_wilcoxon_p(6), min_wilcoxon_p(1), min_wilcoxon_p(0)
    (0.0625, 0.03125, 1.0, 1.0)
    """
    return math.ldexp(1.0, 1 - n) if n > 0 else 1.0


def verdict_flips(
    before: Mapping[str, bool | None], after: Mapping[str, bool | None]
) -> tuple[list[str], list[str]]:
    """Items whose verdict went clean -> hallucinated, and hallucinated -> clean.

    Items without a verdict in either run (insufficient, missing) are not flips.

    >>> verdict_flips({"a": False, "b": True, "c": None, "d": False},
    ...               {"a": True, "b": False, "c": True, "d": False})
    (['a'], ['b'])
    """
    to_hallucinated: list[str] = []
    to_clean: list[str] = []
    for item_id in sorted(before):
        was, now = before[item_id], after.get(item_id)
        if was is None or now is None or was == now:
            continue
        (to_hallucinated if now else to_clean).append(item_id)
    return to_hallucinated, to_clean


def judge_drift(before: JudgeScores, after: JudgeScores) -> tuple[JudgeDrift, ...]:
    """Each judge's mean paired ``after - before``, for the judges of either run (sorted).

    A judge present in only one run has no pairs: drift NaN, ``n_paired`` 0.

    >>> judge_drift({"j": {"x": 0.0, "y": 1.0}, "k": {"x": 0.5}},
    ...             {"j": {"x": 0.5, "y": 1.0}, "m": {"x": 0.1}})  # doctest: +NORMALIZE_WHITESPACE
    (JudgeDrift(judge_id='j', drift=0.25, n_paired=2),
     JudgeDrift(judge_id='k', drift=nan, n_paired=0),
     JudgeDrift(judge_id='m', drift=nan, n_paired=0))
    """
    drifts = []
    for judge_id in sorted(set(before) | set(after)):
        _, a, b = paired(before.get(judge_id, {}), after.get(judge_id, {}))
        drift = float((b - a).mean()) if a.size else float("nan")
        drifts.append(JudgeDrift(judge_id, drift, int(a.size)))
    return tuple(drifts)


def panel_alpha(scores: JudgeScores, item_ids: list[str]) -> float:
    """Krippendorff's interval alpha of the judges' scores on ``item_ids`` (NaN = missing).

    >>> panel_alpha({"a": {"x": 0.0, "y": 1.0}, "b": {"x": 0.0, "y": 1.0}}, ["x", "y"])
    1.0
    """
    if not scores or not item_ids:
        return float("nan")
    matrix = np.asarray(
        [
            [np.nan if (v := by_item.get(i)) is None else v for i in item_ids]
            for by_item in scores.values()
        ],
        dtype=np.float64,
    )
    return krippendorff_alpha(matrix, "interval")


def compare(
    consensus_before: Scores,
    consensus_after: Scores,
    verdicts_before: Mapping[str, bool | None],
    verdicts_after: Mapping[str, bool | None],
    judges_before: JudgeScores,
    judges_after: JudgeScores,
) -> Comparison:
    """The whole comparison of a run (``after``) with its baseline (``before``)."""
    _, a, b = paired(consensus_before, consensus_after)
    to_hallucinated, to_clean = verdict_flips(verdicts_before, verdicts_after)
    common = sorted(set(verdicts_before) & set(verdicts_after))
    return Comparison(
        score=paired_score_change(a, b),
        flips_to_hallucinated=len(to_hallucinated),
        flips_to_clean=len(to_clean),
        judges=judge_drift(judges_before, judges_after),
        agreement_before=panel_alpha(judges_before, common),
        agreement_after=panel_alpha(judges_after, common),
        flipped_items={"to_hallucinated": to_hallucinated, "to_clean": to_clean},
    )


def _fmt(value: float) -> str:
    return f"{value:+.3g}"


def _beyond(value: float, threshold: float, floor: float | None) -> bool:
    """``value`` above the threshold and, when a floor was measured, above the floor too."""
    return value > threshold and (floor is None or math.isnan(floor) or value > floor)


def _ci(s: ScoreChange) -> str:
    return f"95% CI {_fmt(s.ci_low)} to {_fmt(s.ci_high)}"


def check_thresholds(comparison: Comparison, thresholds: Thresholds) -> list[str]:
    """What regressed, one sentence each; empty when every check passes.

    NaN statistics (nothing paired, agreement undefined) never trigger a check. With a
    measured noise floor, the mean rise must also exceed the floor with its bootstrap
    interval above zero, and flips, drifts and the agreement's fall must exceed their floors.

    >>> c = Comparison(ScoreChange(10, 0.2, 0.2, 0.0, 0.002, 0.1, 0.3), 7, 1,
    ...                (JudgeDrift("numbers", 0.21, 10), JudgeDrift("names", 0.0, 10)),
    ...                0.6, 0.3)
    >>> for line in check_thresholds(c, Thresholds()):
    ...     print(line)
    mean consensus score rose +0.2 (threshold 0.05, 95% CI +0.1 to +0.3, Wilcoxon p=0.002)
    7 verdicts flipped to hallucinated (threshold 3)
    judge 'numbers' drifted +0.21 (threshold 0.1)
    agreement (Krippendorff alpha) fell from 0.6 to 0.3 (-0.3, threshold 0.1)
    >>> floor = NoiseFloor(40, 0.0, 0.3, 0.2, 0.05, 5, 10, 0.25, 8, {"numbers": 0.3}, 0.2)
    >>> check_thresholds(c, Thresholds(noise_floor=floor))
    ['agreement (Krippendorff alpha) fell from 0.6 to 0.3 (-0.3, threshold 0.1, noise floor 0.2)']
    """
    problems: list[str] = []
    s = comparison.score
    t = thresholds
    floor = t._floor()
    mean_floor = floor.mean_delta if floor is not None else None
    if (
        t.max_mean_increase is not None
        and not math.isnan(s.mean_delta)
        and _beyond(s.mean_delta, t.max_mean_increase, mean_floor)
        and not math.isnan(s.p_value)
        and s.p_value < t.p_value_alpha
        # beyond the noise: the interval of the mean rise clears zero as well
        and (floor is None or (not math.isnan(s.ci_low) and s.ci_low > 0))
    ):
        beyond = f", noise floor {_fmt(mean_floor)}" if mean_floor is not None else ""
        problems.append(
            f"mean consensus score rose {_fmt(s.mean_delta)} "
            f"(threshold {t.max_mean_increase:g}{beyond}, {_ci(s)}, Wilcoxon p={s.p_value:.3g})"
        )
    flips_floor = floor.flips_to_hallucinated if floor is not None else None
    if t.max_flips_to_hallucinated is not None and comparison.flips_to_hallucinated > max(
        t.max_flips_to_hallucinated, flips_floor if flips_floor is not None else -1
    ):
        beyond = f", noise floor {flips_floor}" if flips_floor is not None else ""
        problems.append(
            f"{comparison.flips_to_hallucinated} verdicts flipped to hallucinated "
            f"(threshold {t.max_flips_to_hallucinated}{beyond})"
        )
    if t.max_judge_drift is not None:
        for judge in comparison.judges:
            judge_floor = floor.judge_drift.get(judge.judge_id) if floor is not None else None
            if not math.isnan(judge.drift) and _beyond(
                abs(judge.drift), t.max_judge_drift, judge_floor
            ):
                beyond = f", noise floor {judge_floor:.3g}" if judge_floor is not None else ""
                problems.append(
                    f"judge {judge.judge_id!r} drifted {_fmt(judge.drift)} "
                    f"(threshold {t.max_judge_drift:g}{beyond})"
                )
    drop = comparison.agreement_before - comparison.agreement_after
    drop_floor = floor.agreement_drop if floor is not None else None
    if (
        t.max_agreement_drop is not None
        and not math.isnan(drop)
        and _beyond(drop, t.max_agreement_drop, drop_floor)
    ):
        beyond = (
            f", noise floor {drop_floor:.3g}"
            if drop_floor is not None and not math.isnan(drop_floor)
            else ""
        )
        problems.append(
            f"agreement (Krippendorff alpha) fell from {comparison.agreement_before:.3g} to "
            f"{comparison.agreement_after:.3g} ({_fmt(-drop)}, threshold "
            f"{t.max_agreement_drop:g}{beyond})"
        )
    return problems


def gate_notes(comparison: Comparison, thresholds: Thresholds) -> list[str]:
    """The checks that could not be applied, one sentence each; empty when all could.

    The mean-increase gate needs a significant Wilcoxon test, which too few changed items
    can never give: without this note such a suite would pass the gate silently. With no
    changed item at all there is no increase to gate, so nothing is said. An A/A check too
    small to measure a floor, and a floor above the mean-increase threshold (a rise of the
    threshold's size cannot be told from the judges' noise on so few items), are said too.

    >>> c = Comparison(ScoreChange(8, 0.3, 0.3, 0.0, 0.0625, 0.2, 0.4, n_changed=5), 0, 0,
    ...                (), 0.5, 0.5)
    >>> gate_notes(c, Thresholds())  # doctest: +NORMALIZE_WHITESPACE
    ['too few paired items (n=5 whose score changed) for the Wilcoxon test to reach
      p < 0.05 (its smallest possible p-value is 0.0625); the mean-increase gate was not
      applied']
    >>> gate_notes(c, Thresholds(p_value_alpha=0.1))
    []
    >>> floor = NoiseFloor(40, 0.0, 0.3, 0.2, 0.05, 3, 8, 0.21, 3)
    >>> for note in gate_notes(c, Thresholds(p_value_alpha=0.1, noise_floor=floor)):
    ...     print(note)  # doctest: +NORMALIZE_WHITESPACE
    too few paired items (n=8) to tell a mean rise of 0.05 from the judges' noise: noise
    alone reaches +0.21 (noise floor from an A/A check of 40 items, false-alarm rate 0.05);
    judge more items
    """
    s = comparison.score
    n = s.n_changed if s.n_changed is not None else s.n_paired
    alpha = thresholds.p_value_alpha
    notes: list[str] = []
    if thresholds.max_mean_increase is not None and n != 0 and min_wilcoxon_p(n) >= alpha:
        notes.append(
            f"too few paired items (n={n} whose score changed) for the Wilcoxon test to "
            f"reach p < {alpha:g} (its smallest possible p-value is {min_wilcoxon_p(n):.3g}); "
            "the mean-increase gate was not applied"
        )
    floor = thresholds.noise_floor
    if floor is not None and not floor.measured:
        notes.append(
            f"the A/A check paired only {floor.aa_items} items, too few to measure the "
            "judges' noise floor; the gate ran on its thresholds alone (raise --noise-sample)"
        )
    elif (
        floor is not None
        and thresholds.max_mean_increase is not None
        and floor.mean_delta > thresholds.max_mean_increase
    ):
        notes.append(
            f"too few paired items (n={s.n_paired}) to tell a mean rise of "
            f"{thresholds.max_mean_increase:g} from the judges' noise: noise alone reaches "
            f"{_fmt(floor.mean_delta)} (noise floor from an A/A check of {floor.aa_items} "
            f"items, false-alarm rate {floor.false_alarm_rate:g}); judge more items"
        )
    return notes


def regression_message(problems: list[str], notes: Sequence[str] = ()) -> str:
    """``"regressed: a; b"``, or ``"no regression"``, then each note as ``". Note: ..."``.

    >>> regression_message(["x", "y"]), regression_message([])
    ('regressed: x; y', 'no regression')
    >>> regression_message([], ["the gate was not applied"])
    'no regression. Note: the gate was not applied'
    """
    verdict = "regressed: " + "; ".join(problems) if problems else "no regression"
    return verdict + "".join(f". Note: {note}" for note in notes)


@dataclass(frozen=True, slots=True)
class GateVerdict:
    """What the regression gate made of a comparison: the thresholds crossed, what could
    not be checked, and the one message saying both."""

    problems: list[str]
    notes: list[str]
    message: str

    @property
    def regressed(self) -> bool:
        return bool(self.problems)


@dataclass(frozen=True, slots=True)
class HeadToHead:
    """A pairwise panel's verdict on the new answers against the baseline's (B against A,
    both orders asked), and its A/A run (the baseline against itself), if any."""

    win_share: float
    """The new answers' wins plus half their ties: 0.5 is "as good as the baseline"."""
    low: float
    high: float
    items: int
    regressed: bool
    """The interval lies below 0.5."""
    aa_win_share: float | None = None
    aa_balanced: bool | None = None
    """The A/A run's interval holds 0.5; None without an A/A run."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def head_to_head_checks(found: HeadToHead) -> tuple[list[str], list[str]]:
    """The head-to-head's problem (the new answers lose beyond the noise) and notes (an
    A/A run that favoured one copy: the pairwise panel is biased and its verdict unused).

    >>> print(head_to_head_checks(HeadToHead(0.38, 0.3, 0.46, 90, True))[0][0][-39:])
    38% [30%, 46%] over 90 items, below 50%
    >>> head_to_head_checks(HeadToHead(0.38, 0.3, 0.46, 90, True, 0.3, False))[0]
    []
    """
    if found.aa_balanced is False:
        return [], [
            f"the head-to-head A/A run (the baseline's answers against themselves) came out "
            f"at {found.aa_win_share or 0.0:.0%}, not 50%: the pairwise panel favours one "
            "side, so its verdict was not used"
        ]
    if found.regressed:
        return [
            f"head to head, the new answers' win share against the baseline's is "
            f"{found.win_share:.0%} [{found.low:.0%}, {found.high:.0%}] over {found.items} "
            "items, below 50%"
        ], []
    return [], []


def gate(
    comparison: Comparison, thresholds: Thresholds, head_to_head: HeadToHead | None = None
) -> GateVerdict:
    """The gate's verdict on ``comparison`` (and a pairwise panel's ``head_to_head``):
    every face and the regression flow ask this one function, so none decides "regressed"
    on its own."""
    problems = check_thresholds(comparison, thresholds)
    notes = gate_notes(comparison, thresholds)
    if head_to_head is not None:
        more_problems, more_notes = head_to_head_checks(head_to_head)
        problems, notes = problems + more_problems, notes + more_notes
    return GateVerdict(problems, notes, regression_message(problems, notes))
