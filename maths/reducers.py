"""Named consensus rules: how a panel's answers on one item become the panel's answer.

Three families, each a registry filled by a decorator (as Inspect AI's ``@score_reducer``),
so that a rule is a name a panel file, the command line and the store can all spell:

- **score** reducers turn the scored judges' 0-1 scores into one score: ``median``
  (default), ``mean``, ``trimmed_mean[:P]``, ``weighted_median``;
- **span** reducers turn the characters each span judge marked into the characters the
  panel marks: ``majority`` (default), ``at_least:K``, ``union``, ``weighted[:T]``,
  ``dawid_skene[:T]``;
- **verdict** rules decide "hallucinated": ``majority`` (of the judges' own verdicts),
  ``at_least:K``, ``weighted[:T]``, ``score:T`` (the consensus score against T), ``spans``
  (the consensus has a span), ``dawid_skene[:T]``; ``auto`` resolves to ``spans`` for a
  panel of span judges and to ``majority`` otherwise.

A rule is written ``name`` or ``name:param``. Only answering judges take part: an unscored
judgment is filtered out before any reducer sees it, never counted as a vote either way.

Why a strict majority of *verdicts* rather than "median > threshold": for judges that share
a threshold the two agree on odd panels, and on even panels the vote says what the user
means by a majority: two judges at 0.0 and two at 0.6 give a median of 0.3, which is "at or
above the score prompt's 0.3", yet only half the panel called the response hallucinated.
An even split is never a majority, for verdicts and for characters alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from juryflow.maths.names import did_you_mean

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
Family = Literal["score", "spans", "verdict"]

DEFAULT_TRIM = 0.2
"""Share cut from each end by ``trimmed_mean`` without a parameter."""


class RuleError(ValueError):
    """A consensus rule that cannot be used, with a message naming the fix."""


# ------------------------------------------------------------------------ fitted reliability


@dataclass(frozen=True, slots=True)
class Reliability:
    """How often each judge is right, by class: what a Dawid–Skene vote weighs judges by.

    Estimated without labels by EM (``juryflow agreement``, re-aggregation) or from human
    labels (``juryflow calibrate``); stored with the rule so that applying it to one item
    needs nothing but that item.
    """

    sensitivity: Mapping[str, float]
    """P(judge says hallucinated | it is), per judge id."""
    specificity: Mapping[str, float]
    """P(judge says clean | it is clean), per judge id."""
    prevalence: float
    """Prior share of hallucinated units (items, or characters for spans)."""

    def log_odds(self, judge_ids: Sequence[str], votes: npt.ArrayLike) -> FloatArray:
        """Posterior log-odds of "hallucinated" for each column of ``votes``.

        ``votes`` is ``(n_judges, n_units)`` of 0/1 with NaN where a judge gave no vote; a
        judge the fit does not know abstains.

        >>> r = Reliability({"a": 0.9, "b": 0.6}, {"a": 0.9, "b": 0.6}, 0.5)
        >>> r.log_odds(["a", "b"], [[1, 0], [0, 1]]).round(3).tolist()
        [1.792, -1.792]
        """
        v = np.asarray(votes, dtype=np.float64).reshape(len(judge_ids), -1)
        prior = _clip(self.prevalence)
        total = np.full(v.shape[1], math.log(prior / (1.0 - prior)))
        for row, judge_id in enumerate(judge_ids):
            if judge_id not in self.sensitivity or judge_id not in self.specificity:
                continue
            sens = _clip(self.sensitivity[judge_id])
            spec = _clip(self.specificity[judge_id])
            said = v[row]
            total += np.where(
                np.isnan(said),
                0.0,
                np.where(
                    said > 0.5,
                    math.log(sens / (1.0 - spec)),
                    math.log((1.0 - sens) / spec),
                ),
            )
        return total

    def to_dict(self) -> dict[str, Any]:
        return {
            "sensitivity": dict(self.sensitivity),
            "specificity": dict(self.specificity),
            "prevalence": self.prevalence,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reliability:
        return cls(
            sensitivity={str(k): float(v) for k, v in data["sensitivity"].items()},
            specificity={str(k): float(v) for k, v in data["specificity"].items()},
            prevalence=float(data["prevalence"]),
        )


PREFERENCE_CLASS = {0.0: 0, 1.0: 1, 0.5: 2}
"""A pairwise judge's score (B's win share) as its class: 0 A, 1 B, 2 tie (pairwise.records)."""
_CLASS_SCORE = (0.0, 1.0, 0.5)


@dataclass(frozen=True, slots=True)
class PreferenceFit:
    """How each pairwise judge answers given the truth (A, B or tie), fitted over a run by
    three-class Dawid–Skene (:func:`juryflow.maths.pairwise.rules.dawid_skene`): what the
    ``dawid_skene`` score rule weighs a pairwise panel's verdicts by, stored with the rule.
    """

    confusion: Mapping[str, tuple[tuple[float, ...], ...]]
    """Per judge id, rows truth A, B, tie: P(the judge says A, B, tie | truth)."""
    prior: tuple[float, ...]
    """The share of items whose truth is A, B, tie."""

    def decide(self, judge_ids: Sequence[str], scores: FloatArray, weights: FloatArray) -> float:
        """One item's most probable class given its judges' verdicts, as a score (0 A,
        0.5 tie, 1 B); a draw at the top is a tie. A judge weighted 0 or unknown to the
        fit abstains; with none left the plurality decides.

        >>> sure = ((0.9, 0.05, 0.05), (0.05, 0.9, 0.05), (0.05, 0.05, 0.9))
        >>> coin = ((1 / 3,) * 3,) * 3
        >>> fit = PreferenceFit({"sure": sure, "coin": coin, "c2": coin}, (1/3, 1/3, 1/3))
        >>> fit.decide(["sure", "coin", "c2"], np.array([0.0, 1.0, 1.0]), np.ones(3))
        0.0
        """
        log = np.log(np.clip(np.asarray(self.prior, dtype=np.float64), 1e-9, 1.0))
        voted = False
        for judge_id, score, weight in zip(
            judge_ids, scores.tolist(), weights.tolist(), strict=True
        ):
            said = PREFERENCE_CLASS.get(score)
            if weight <= 0 or said is None or judge_id not in self.confusion:
                continue
            table = np.asarray(self.confusion[judge_id], dtype=np.float64)
            log = log + np.log(np.clip(table[:, said], 1e-9, 1.0))
            voted = True
        if not voted:
            return _preference(scores, weights, None)
        at_top = log >= log.max() - 1e-9
        return 0.5 if int(at_top.sum()) > 1 else _CLASS_SCORE[int(np.argmax(log))]

    def to_dict(self) -> dict[str, Any]:
        return {
            "confusion": {j: [list(row) for row in table] for j, table in self.confusion.items()},
            "prior": list(self.prior),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PreferenceFit:
        return cls(
            confusion={
                str(j): tuple(tuple(float(p) for p in row) for row in table)
                for j, table in data["confusion"].items()
            },
            prior=tuple(float(p) for p in data["prior"]),
        )


def _clip(p: float) -> float:
    # A judge estimated never wrong would get an infinite weight and outvote everyone.
    return min(max(float(p), 1e-3), 1.0 - 1e-3)


@dataclass(frozen=True, slots=True)
class StackFit:
    """A logistic regression over the judges' answers, fitted on human labels by
    ``juryflow calibrate``: what the ``stacked`` verdict rule weighs each judge by.

    Each judge's answer is one feature in [-1, 1] (``verdicts``: +1 flagged, -1 clean;
    ``scores``: ``2 * score - 1``) and 0 where it gave none, so a silent judge pulls neither
    way. Stored as coefficients so a re-aggregation and the viewer can show each judge's
    weight; correlated judges share a weight instead of outvoting the rest.
    """

    intercept: float
    coefficients: Mapping[str, float]
    features: Literal["verdicts", "scores"] = "verdicts"

    def log_odds(
        self, judge_ids: Sequence[str], verdicts: npt.ArrayLike, scores: npt.ArrayLike | None
    ) -> FloatArray:
        """The model's log-odds of "flagged" for each column of ``(n_judges, n_units)``
        answers (NaN: no answer); a judge the fit does not know has no say.

        >>> fit = StackFit(-1.0, {"a": 2.0, "b": 0.5})
        >>> fit.log_odds(["a", "b"], [[1, 0], [np.nan, 1]], None).tolist()
        [1.0, -2.5]
        """
        source = verdicts if self.features == "verdicts" or scores is None else scores
        x = np.asarray(source, dtype=np.float64).reshape(len(judge_ids), -1)
        x = np.where(np.isnan(x), 0.0, 2.0 * x - 1.0)
        coefficients = np.asarray([self.coefficients.get(j, 0.0) for j in judge_ids])
        return np.asarray(self.intercept + coefficients @ x)

    def to_dict(self) -> dict[str, Any]:
        return {
            "intercept": self.intercept,
            "coefficients": dict(self.coefficients),
            "features": self.features,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StackFit:
        features = str(data.get("features", "verdicts"))
        if features not in ("verdicts", "scores"):
            raise ValueError(f"unknown stacking features {features!r}")
        return cls(
            intercept=float(data["intercept"]),
            coefficients={str(k): float(v) for k, v in data["coefficients"].items()},
            features=features,  # type: ignore[arg-type]
        )


# ---------------------------------------------------------------------------- registries


@dataclass(frozen=True, slots=True)
class _Entry:
    fn: Callable[..., Any]
    param: Literal["none", "int", "share", "threshold"]
    default: float | None
    needs_fit: bool
    doc: str


_REGISTRY: dict[Family, dict[str, _Entry]] = {"score": {}, "spans": {}, "verdict": {}}


def _reducer(
    family: Family,
    name: str,
    param: Literal["none", "int", "share", "threshold"] = "none",
    default: float | None = None,
    needs_fit: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        _REGISTRY[family][name] = _Entry(fn, param, default, needs_fit, doc)
        return fn

    return register


def score_reducer(name: str, **kw: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(scores, weights, param) -> float`` as score reducer ``name``."""
    return _reducer("score", name, **kw)


def span_reducer(name: str, **kw: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(covered, weights, param, judge_ids, fit) -> flagged`` as span reducer."""
    return _reducer("spans", name, **kw)


def verdict_rule(name: str, **kw: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(ballot, param) -> bool`` as verdict rule ``name``."""
    return _reducer("verdict", name, **kw)


def reducer_names(family: Family) -> list[str]:
    """The registered names of a family.

    >>> reducer_names("score")
    ['dawid_skene', 'mean', 'median', 'preference', 'trimmed_mean', 'weighted_median']
    """
    return sorted(_REGISTRY[family])


def describe_reducers() -> dict[str, dict[str, str]]:
    """Every registered rule with its one-line description, by family (for ``--help``)."""
    return {fam: {n: e.doc for n, e in sorted(reg.items())} for fam, reg in _REGISTRY.items()}


# ---------------------------------------------------------------------------- score rules


def _weighted_quantile_low(values: FloatArray, weights: FloatArray, q: float) -> float:
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cumulative = np.cumsum(w)
    # The lowest value whose cumulative weight reaches the share: with equal weights and an
    # even count this is the lower median, the value half the panel is at or below.
    return float(v[np.searchsorted(cumulative, q * cumulative[-1] - 1e-12)])


@score_reducer("median")
def _median(scores: FloatArray, weights: FloatArray, param: float | None) -> float:
    """The median of the scores (the mean of the two middle ones on an even panel).

    A judge weighted 0 takes no part (how a calibration leaves a judge out).

    >>> _median(np.array([0.0, 0.3, 1.0]), np.ones(3), None)
    0.3
    >>> _median(np.array([0.0, 0.3, 1.0]), np.array([1.0, 0.0, 1.0]), None)
    0.5
    """
    voting = scores[weights > 0]
    return float(np.median(voting if voting.size else scores))


@score_reducer("preference")
def _preference(scores: FloatArray, weights: FloatArray, param: float | None) -> float:
    """Pairwise judges: the plurality of their verdicts (0 A, 0.5 tie, 1 B), a draw a tie.

    Each judge's verdict is one it gave in both orders (an inconsistent judge is unscored
    and has no say); a draw at the top is a tie, never a coin flip. Judge weights count; a
    judge weighted 0 takes no part. On other scores it is their weighted mode, a draw
    settled at 0.5 held within the tied values (so it stays between them, and mirrors).

    >>> _preference(np.array([0.0, 0.0, 1.0]), np.ones(3), None)
    0.0
    >>> _preference(np.array([0.0, 1.0]), np.ones(2), None), _preference(
    ...     np.array([0.0, 1.0, 0.5]), np.ones(3), None)
    (0.5, 0.5)
    """
    voting = weights > 0
    if not voting.any():
        voting = np.ones_like(weights, dtype=bool)
    values, inverse = np.unique(scores[voting], return_inverse=True)
    votes = np.bincount(inverse, weights=np.where(weights[voting] > 0, weights[voting], 1.0))
    tied = values[votes >= votes.max() - 1e-12]
    return float(tied[0]) if tied.size == 1 else float(np.clip(0.5, tied.min(), tied.max()))


@score_reducer("dawid_skene", needs_fit=True)
def _preference_dawid_skene(scores: FloatArray, weights: FloatArray, param: float | None) -> float:
    """Pairwise judges: three-class Dawid–Skene over the run, each judge weighed by how it
    answers given the truth; the plurality until the run's end has fitted it.

    Only for a pairwise panel (its scores are verdicts 0 A, 0.5 tie, 1 B). Applied with its
    fit through :meth:`PreferenceFit.decide`; without one it is :func:`_preference`.

    >>> _preference_dawid_skene(np.array([0.0, 0.0, 1.0]), np.ones(3), None)
    0.0
    """
    return _preference(scores, weights, param)


@score_reducer("mean")
def _mean(scores: FloatArray, weights: FloatArray, param: float | None) -> float:
    """The weighted mean of the scores (judge weights; 1 each by default).

    >>> _mean(np.array([0.0, 1.0]), np.array([3.0, 1.0]), None)
    0.25
    """
    return float(np.average(scores, weights=weights))


@score_reducer("trimmed_mean", param="share", default=DEFAULT_TRIM)
def _trimmed_mean(scores: FloatArray, weights: FloatArray, param: float | None) -> float:
    """The mean after cutting a share P (default 0.2) of the scores from each end.

    Same as ``scipy.stats.trim_mean``, which it calls; with fewer scores than it takes to
    cut one from each end it is the plain mean.

    >>> _trimmed_mean(np.array([0.0, 0.3, 0.3, 0.3, 1.0]), np.ones(5), 0.2)
    0.3
    """
    # scipy.stats takes ~0.4 s to import: paid by the runs that use this rule only
    from scipy import stats

    return float(stats.trim_mean(scores, DEFAULT_TRIM if param is None else param))


@score_reducer("weighted_median")
def _weighted_median(scores: FloatArray, weights: FloatArray, param: float | None) -> float:
    """The lowest score that judges holding half the total weight are at or below.

    >>> _weighted_median(np.array([0.0, 0.6, 1.0]), np.array([1.0, 1.0, 3.0]), None)
    1.0
    >>> _weighted_median(np.array([0.0, 0.6]), np.ones(2), None)  # the lower median
    0.0
    """
    return _weighted_quantile_low(scores, weights, 0.5)


# ----------------------------------------------------------------------------- span rules


@span_reducer("majority")
def _span_majority(
    covered: BoolArray, weights: FloatArray, param: float | None, judges: Sequence[str],
    fit: Reliability | None,
) -> BoolArray:  # fmt: skip
    """Characters marked by strictly more than half of the answering span judges (a judge
    weighted 0 takes no part).

    >>> _span_majority(np.array([[1, 1, 0], [1, 0, 0]], bool), np.ones(2), None, [], None)
    array([ True, False, False])
    """
    voting = covered[weights > 0]
    return np.asarray(voting.sum(axis=0) * 2 > voting.shape[0])


@span_reducer("at_least", param="int", default=1)
def _span_at_least(
    covered: BoolArray, weights: FloatArray, param: float | None, judges: Sequence[str],
    fit: Reliability | None,
) -> BoolArray:  # fmt: skip
    """Characters marked by at least K span judges (``at_least:1`` is the union).

    >>> _span_at_least(np.array([[1, 1, 0], [1, 0, 1]], bool), np.ones(2), 2, [], None)
    array([ True, False, False])
    """
    return np.asarray(covered[weights > 0].sum(axis=0) >= int(param or 1))


@span_reducer("union")
def _span_union(
    covered: BoolArray, weights: FloatArray, param: float | None, judges: Sequence[str],
    fit: Reliability | None,
) -> BoolArray:  # fmt: skip
    """Characters marked by any span judge: what a panel of specialists wants.

    >>> _span_union(np.array([[1, 0, 0], [0, 0, 1]], bool), np.ones(2), None, [], None)
    array([ True, False,  True])
    """
    return np.asarray(covered.any(axis=0))


@span_reducer("weighted", param="share", default=0.5)
def _span_weighted(
    covered: BoolArray, weights: FloatArray, param: float | None, judges: Sequence[str],
    fit: Reliability | None,
) -> BoolArray:  # fmt: skip
    """Characters whose judges hold strictly more than a share T (default 0.5) of the weight.

    >>> w = np.array([2.0, 1.0, 1.0])
    >>> _span_weighted(np.array([[1, 0], [0, 1], [0, 1]], bool), w, 0.5, [], None)
    array([False, False])
    >>> _span_weighted(np.array([[1, 0], [0, 1], [0, 1]], bool), w, 0.4, [], None)
    array([ True,  True])
    """
    total = float(weights.sum())
    if total <= 0:
        return np.zeros(covered.shape[1], dtype=bool)
    share = weights @ covered.astype(np.float64) / total
    return np.asarray(share > (0.5 if param is None else param) + 1e-12)


@span_reducer("dawid_skene", param="share", default=0.5, needs_fit=True)
def _span_dawid_skene(
    covered: BoolArray, weights: FloatArray, param: float | None, judges: Sequence[str],
    fit: Reliability | None,
) -> BoolArray:  # fmt: skip
    """Characters whose Dawid–Skene posterior (per-character judge reliability) exceeds T.

    >>> fit = Reliability({"a": 0.9, "b": 0.2}, {"a": 0.9, "b": 0.9}, 0.3)
    >>> _span_dawid_skene(np.array([[1, 0], [0, 1]], bool), np.ones(2), 0.5, ["a", "b"], fit)
    array([ True, False])
    """
    if fit is None:
        raise RuleError("spans=dawid_skene needs a fitted reliability (re-aggregate the run)")
    posterior = _sigmoid(fit.log_odds(judges, covered.astype(np.float64)))
    return np.asarray(posterior > (0.5 if param is None else param))


def _sigmoid(x: FloatArray) -> FloatArray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * x)))


# -------------------------------------------------------------------------- verdict rules


@dataclass(frozen=True, slots=True)
class Ballot:
    """What a verdict rule sees of one item: the answering judges and the panel's answer."""

    judge_ids: tuple[str, ...]
    verdicts: BoolArray
    """Each answering judge's own verdict (its prompt's threshold)."""
    weights: FloatArray
    score: float
    """The consensus score (the score reducer's)."""
    has_spans: bool
    """The consensus has at least one span."""
    fit: Reliability | None = None
    scores: FloatArray | None = None
    """Each answering judge's own score (what ``stacked`` over scores reads)."""
    stack: StackFit | None = None


@verdict_rule("majority")
def _verdict_majority(ballot: Ballot, param: float | None) -> bool:
    """Strictly more than half of the answering judges said hallucinated (a tie is clean).

    A judge weighted 0 takes no part (how a calibration leaves a judge out).

    >>> _verdict_majority(_ballot([1, 1, 0, 0]), None)
    False
    >>> _verdict_majority(_ballot([1, 1, 0, 0], weights=[1, 1, 0, 1]), None)
    True
    """
    voting = ballot.weights > 0
    return bool(ballot.verdicts[voting].sum() * 2 > voting.sum())


@verdict_rule("at_least", param="int", default=1)
def _verdict_at_least(ballot: Ballot, param: float | None) -> bool:
    """At least K answering judges said hallucinated (a judge weighted 0 takes no part).

    >>> _verdict_at_least(_ballot([1, 0, 0]), 1)
    True
    >>> _verdict_at_least(_ballot([1, 0, 0], weights=[0, 1, 1]), 1)
    False
    """
    return bool(ballot.verdicts[ballot.weights > 0].sum() >= int(param or 1))


@verdict_rule("weighted", param="share", default=0.5)
def _verdict_weighted(ballot: Ballot, param: float | None) -> bool:
    """Judges holding strictly more than a share T (default 0.5) of the weight said so.

    >>> _verdict_weighted(_ballot([1, 0, 0], weights=[3, 1, 1]), 0.5)
    True
    """
    total = float(ballot.weights.sum())
    share = float(ballot.weights @ ballot.verdicts.astype(np.float64)) / total if total else 0.0
    return share > (0.5 if param is None else param) + 1e-12


@verdict_rule("score", param="threshold", default=0.5)
def _verdict_score(ballot: Ballot, param: float | None) -> bool:
    """The consensus score is at or above T (default 0.5).

    >>> _verdict_score(_ballot([0, 0, 1], score=0.3), 0.3)
    True
    """
    return ballot.score >= (0.5 if param is None else param) - 1e-12


@verdict_rule("spans")
def _verdict_spans(ballot: Ballot, param: float | None) -> bool:
    """The consensus marks at least one span, so verdict and spans cannot contradict.

    >>> _verdict_spans(_ballot([1, 1, 1], has_spans=False), None)
    False
    """
    return ballot.has_spans


@verdict_rule("dawid_skene", param="share", default=0.5, needs_fit=True)
def _verdict_dawid_skene(ballot: Ballot, param: float | None) -> bool:
    """The Dawid–Skene posterior (each judge weighed by its estimated reliability) exceeds T.

    >>> fit = Reliability({"a": 0.95, "b": 0.6, "c": 0.6}, {"a": 0.95, "b": 0.6, "c": 0.6}, 0.5)
    >>> _verdict_dawid_skene(_ballot([1, 0, 0], ids=("a", "b", "c"), fit=fit), 0.5)
    True
    """
    if ballot.fit is None:
        raise RuleError("verdict=dawid_skene needs a fitted reliability (re-aggregate the run)")
    votes = ballot.verdicts.astype(np.float64)[:, None]
    # ``is None``, not ``or``: dawid_skene:0 is a threshold of its own (any posterior above 0).
    threshold = 0.5 if param is None else param
    return bool(_sigmoid(ballot.fit.log_odds(ballot.judge_ids, votes))[0] > threshold)


@verdict_rule("stacked", param="share", default=0.5)
def _verdict_stacked(ballot: Ballot, param: float | None) -> bool:
    """A logistic regression over the judges' answers, fitted by ``juryflow calibrate``,
    gives a probability above T (default 0.5).

    >>> fit = StackFit(-1.0, {"j0": 2.0, "j1": 0.5, "j2": 0.5})
    >>> _verdict_stacked(_ballot([1, 0, 0], stack=fit), 0.5), _verdict_stacked(
    ...     _ballot([0, 1, 1], stack=fit), 0.5)
    (False, False)
    >>> _verdict_stacked(_ballot([1, 1, 0], stack=fit), 0.5)
    True
    """
    if ballot.stack is None:
        raise RuleError(
            "verdict=stacked needs coefficients fitted on labels: use a calibration from "
            "`juryflow calibrate` (--calibration NAME)"
        )
    votes = ballot.verdicts.astype(np.float64)[:, None]
    scores = None if ballot.scores is None else ballot.scores.astype(np.float64)[:, None]
    log_odds = ballot.stack.log_odds(ballot.judge_ids, votes, scores)
    # The tolerance makes a tie a tie: equal judges split 3 to 3 sum to 1e-15, not 0.
    return bool(_sigmoid(log_odds)[0] > (0.5 if param is None else param) + 1e-12)


def _ballot(
    verdicts: Sequence[int],
    weights: Sequence[float] | None = None,
    score: float = 0.0,
    has_spans: bool = False,
    ids: tuple[str, ...] | None = None,
    fit: Reliability | None = None,
    stack: StackFit | None = None,
) -> Ballot:
    """A ballot for the doctests."""
    n = len(verdicts)
    return Ballot(
        judge_ids=ids or tuple(f"j{i}" for i in range(n)),
        verdicts=np.asarray(verdicts, dtype=bool),
        weights=np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64),
        score=score,
        has_spans=has_spans,
        fit=fit,
        stack=stack,
    )


# ------------------------------------------------------------------------------ the rule


@dataclass(frozen=True, slots=True)
class RuleRef:
    """One family's choice: a registered name and its parameter (None: the default)."""

    family: Family
    name: str
    param: float | None = None

    @classmethod
    def parse(cls, family: Family, text: str) -> RuleRef:
        """``name`` or ``name:param``, checked against the registry.

        >>> RuleRef.parse("spans", "at_least:2")
        RuleRef(family='spans', name='at_least', param=2.0)
        >>> RuleRef.parse("spans", "most")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        juryflow.maths.reducers.RuleError: unknown spans rule 'most'; known: ...
        """
        name, _, raw = str(text).strip().partition(":")
        registry = _REGISTRY[family]
        known = ", ".join(sorted(registry))
        if family == "verdict":
            known += ", auto"
            if name == "auto" and not raw:
                return cls(family, "auto")
        entry = registry.get(name)
        if entry is None:
            hint = did_you_mean(name, [*registry, *(["auto"] if family == "verdict" else [])])
            raise RuleError(f"unknown {family} rule {name!r}{hint}; known: {known}")
        if not raw:
            return cls(family, name)
        if entry.param == "none":
            raise RuleError(f"{family} rule {name!r} takes no parameter; write '{name}'")
        try:
            value = float(raw)
        except ValueError:
            raise RuleError(f"{family} rule '{text}': {raw!r} is not a number") from None
        _check_param(family, name, entry.param, value)
        return cls(family, name, value)

    @property
    def entry(self) -> _Entry:
        return _REGISTRY[self.family][self.name]

    @property
    def needs_fit(self) -> bool:
        return self.name != "auto" and self.entry.needs_fit

    def __str__(self) -> str:
        if self.param is None:
            return self.name
        shown = int(self.param) if self.entry.param == "int" else self.param
        return f"{self.name}:{shown:g}" if isinstance(shown, float) else f"{self.name}:{shown}"


def _check_param(family: str, name: str, kind: str, value: float) -> None:
    ok = {
        "int": value >= 1 and float(value).is_integer(),
        "share": 0.0 <= value < 1.0,
        "threshold": 0.0 < value <= 1.0,
    }[kind]
    if not ok:
        need = {
            "int": "a whole number of judges, at least 1",
            "share": "a share in [0, 1)",
            "threshold": "a threshold in (0, 1]",
        }[kind]
        raise RuleError(f"{family} rule '{name}:{value:g}': the parameter must be {need}")


DEFAULT_SCORE = "median"
DEFAULT_SPANS = "majority"
DEFAULT_VERDICT = "auto"


@dataclass(frozen=True, slots=True)
class ConsensusRule:
    """The whole consensus rule of a run: score, spans and verdict rules, judge weights.

    Stored with every run (``runs.consensus``), shown in reports and artifacts, and applied
    again by ``juryflow reaggregate --consensus``. ``name`` is the calibration it came from.
    """

    score: RuleRef = field(default_factory=lambda: RuleRef("score", DEFAULT_SCORE))
    spans: RuleRef = field(default_factory=lambda: RuleRef("spans", DEFAULT_SPANS))
    verdict: RuleRef = field(default_factory=lambda: RuleRef("verdict", DEFAULT_VERDICT))
    weights: Mapping[str, float] = field(default_factory=dict)
    """Per-judge weights for the weighted score and verdict rules (missing judges weigh 1)."""
    span_weights: Mapping[str, float] = field(default_factory=dict)
    """Per-judge weights for ``spans: weighted``; default: ``weights``. Kept apart because
    how often a judge marks the right characters is not how often it gets the verdict."""
    verdict_fit: Reliability | None = None
    span_fit: Reliability | None = None
    score_fit: PreferenceFit | None = None
    """The ``dawid_skene`` score rule's fit over a pairwise run."""
    name: str | None = None
    stack: StackFit | None = None
    """The ``stacked`` verdict rule's fitted logistic regression."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ConsensusRule:
        """A rule from a panel file's ``consensus:`` block or a stored run.

        >>> str(ConsensusRule.from_dict({"spans": "union", "verdict": "spans"}))
        'score median · spans union · verdict spans'
        >>> ConsensusRule.from_dict({"spans": "union", "vote": "spans"})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        juryflow.maths.reducers.RuleError: consensus: unknown key(s) vote; keys are ...
        """
        data = dict(data or {})
        allowed = (
            "score", "spans", "verdict", "weights", "span_weights", "name", "verdict_fit",
            "span_fit", "score_fit", "stack",
        )  # fmt: skip
        unknown = [k for k in data if k not in allowed]
        if unknown:
            raise RuleError(
                f"consensus: unknown key(s) {', '.join(map(str, unknown))}"
                f"{did_you_mean(unknown[0], allowed)}; "
                "keys are score, spans, verdict, weights, span_weights, name, stack"
            )
        return cls(
            score=RuleRef.parse("score", data.get("score") or DEFAULT_SCORE),
            spans=RuleRef.parse("spans", data.get("spans") or DEFAULT_SPANS),
            verdict=RuleRef.parse("verdict", data.get("verdict") or DEFAULT_VERDICT),
            weights=_weights("weights", data.get("weights")),
            span_weights=_weights("span_weights", data.get("span_weights")),
            verdict_fit=_stored(Reliability, data.get("verdict_fit"), "reliability", _REFIT),
            span_fit=_stored(Reliability, data.get("span_fit"), "reliability", _REFIT),
            score_fit=_stored(PreferenceFit, data.get("score_fit"), "preference", _REFIT),
            name=data.get("name"),
            stack=_stored(
                StackFit, data.get("stack"), "stacking", "calibrate again (`juryflow calibrate`)"
            ),
        )

    @classmethod
    def from_options(
        cls, options: Sequence[str], base: ConsensusRule | None = None
    ) -> ConsensusRule:
        """``["spans=at_least:2", "verdict=spans"]`` (``--consensus``) over ``base``.

        >>> str(ConsensusRule.from_options(["score=mean", "verdict=score:0.3"]))
        'score mean · spans majority · verdict score:0.3'
        """
        data = (base or cls()).to_dict()
        for option in options:
            key, sep, value = option.partition("=")
            key = key.strip()
            if not sep or key not in ("score", "spans", "verdict"):
                raise RuleError(
                    f"--consensus {option!r}: write FAMILY=RULE with FAMILY score, spans or "
                    "verdict, e.g. --consensus spans=at_least:2"
                )
            data[key] = value.strip()
            # A fit belongs to the rule it was made for: a new verdict or span rule drops it.
            data.pop(f"{'span' if key == 'spans' else key}_fit", None)
            if key == "verdict":
                data.pop("stack", None)
        data.pop("name", None)
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "score": str(self.score),
            "spans": str(self.spans),
            "verdict": str(self.verdict),
        }
        if self.weights:
            data["weights"] = dict(self.weights)
        if self.span_weights:
            data["span_weights"] = dict(self.span_weights)
        if self.verdict_fit is not None:
            data["verdict_fit"] = self.verdict_fit.to_dict()
        if self.span_fit is not None:
            data["span_fit"] = self.span_fit.to_dict()
        if self.score_fit is not None:
            data["score_fit"] = self.score_fit.to_dict()
        if self.stack is not None:
            data["stack"] = self.stack.to_dict()
        if self.name:
            data["name"] = self.name
        return data

    def __str__(self) -> str:
        text = f"score {self.score} · spans {self.spans} · verdict {self.verdict}"
        if self.weights:
            text += " · weights " + ", ".join(f"{k}={v:g}" for k, v in self.weights.items())
        if self.span_weights:
            text += " · span weights " + ", ".join(
                f"{k}={v:g}" for k, v in self.span_weights.items()
            )
        if self.stack is not None:
            stack = self.stack
            text += f" · stacked on {stack.features}: intercept {stack.intercept:.2f}, " + (
                ", ".join(f"{k}={v:.2f}" for k, v in stack.coefficients.items())
            )
        return f"{text} (calibration {self.name})" if self.name else text

    def resolve(self, all_span_judges: bool) -> ConsensusRule:
        """``verdict: auto`` made concrete for a panel: ``spans`` when every judge answers
        with spans (verdict and spans then cannot contradict), ``majority`` otherwise.

        >>> str(ConsensusRule().resolve(all_span_judges=True).verdict)
        'spans'
        """
        if self.verdict.name != "auto":
            return self
        return replace(self, verdict=RuleRef("verdict", "spans" if all_span_judges else "majority"))

    @property
    def needs_fit(self) -> bool:
        """A rule that weighs judges by a reliability estimated over the whole run."""
        return (
            (self.verdict.needs_fit and self.verdict_fit is None)
            or (self.spans.needs_fit and self.span_fit is None)
            or (self.score.needs_fit and self.score_fit is None)
        )

    def provisional(self) -> ConsensusRule:
        """The rule with its run-fitted parts replaced by their unfitted counterparts
        (``dawid_skene`` verdicts by ``majority``, spans by ``majority``): what a chunk
        uses before the run's end has the data to fit it.

        >>> str(ConsensusRule.from_options(["verdict=dawid_skene"]).provisional().verdict)
        'majority'
        """
        rule = self
        if self.verdict.needs_fit and self.verdict_fit is None:
            rule = replace(rule, verdict=RuleRef("verdict", "majority"))
        if self.spans.needs_fit and self.span_fit is None:
            rule = replace(rule, spans=RuleRef("spans", "majority"))
        if self.score.needs_fit and self.score_fit is None:
            rule = replace(rule, score=RuleRef("score", "preference"))
        return rule

    def weight_vector(self, judge_ids: Sequence[str]) -> FloatArray:
        return np.asarray([self.weights.get(j, 1.0) for j in judge_ids], dtype=np.float64)

    def span_weight_vector(self, judge_ids: Sequence[str]) -> FloatArray:
        weights = self.span_weights or self.weights
        return np.asarray([weights.get(j, 1.0) for j in judge_ids], dtype=np.float64)

    def check_kind(self, pairwise: bool) -> None:
        """The ``dawid_skene`` score rule reads A / tie / B verdicts: a pairwise panel's.

        >>> rule = ConsensusRule.from_dict({"score": "dawid_skene"})
        >>> rule.check_kind(pairwise=False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        juryflow.maths.reducers.RuleError: score rule dawid_skene weighs pairwise judges' ...
        """
        if self.score.name == "dawid_skene" and not pairwise:
            raise RuleError(
                "score rule dawid_skene weighs pairwise judges' A / tie / B verdicts; this "
                "panel's judges give scores: use score median, or verdict dawid_skene for "
                "their verdicts"
            )

    def check_judges(self, judge_ids: Sequence[str]) -> None:
        """Weights naming a judge the panel does not have are a typo, not a no-op."""
        unknown = sorted((set(self.weights) | set(self.span_weights)) - set(judge_ids))
        if unknown:
            hint = did_you_mean(unknown[0], judge_ids)
            raise RuleError(
                f"consensus.weights name judge(s) {', '.join(unknown)}{hint} that the panel "
                f"does not have; the panel's judges are {', '.join(judge_ids)}"
            )


def _weights(key: str, weights: Any) -> dict[str, float]:
    if weights is None:
        return {}
    if not isinstance(weights, Mapping):
        raise RuleError(f"consensus.{key} must map judge ids to numbers, e.g. {{claude: 2}}")
    checked: dict[str, float] = {}
    for judge_id, weight in weights.items():
        try:
            value = float(weight)
        except (TypeError, ValueError):
            raise RuleError(f"consensus.{key}.{judge_id}: {weight!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise RuleError(f"consensus.{key}.{judge_id}: weights must be >= 0")
        checked[str(judge_id)] = value
    return checked


_Fit = TypeVar("_Fit", Reliability, PreferenceFit, StackFit)
_REFIT = "re-aggregate the run"


def _stored(kind: type[_Fit], data: Any, what: str, fix: str) -> _Fit | None:
    """A fit stored with a rule (``runs.consensus``) as its record; a malformed one is a
    RuleError saying ``fix``."""
    if data is None or isinstance(data, kind):
        return data
    try:
        return kind.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise RuleError(f"a stored {what} fit is malformed; {fix}") from None


DEFAULT_RULE = ConsensusRule()
"""Median scores, majority-overlap spans, and a verdict the panel's kind calls for."""


# ------------------------------------------------------------------------------ applying


def reduce_score(
    rule: ConsensusRule, scores: FloatArray, weights: FloatArray, judge_ids: Sequence[str] = ()
) -> float:
    if rule.score_fit is not None and rule.score.needs_fit and len(judge_ids) == scores.size:
        return rule.score_fit.decide(judge_ids, scores, weights)
    return float(rule.score.entry.fn(scores, weights, rule.score.param))


def reduce_spans(
    rule: ConsensusRule, covered: BoolArray, weights: FloatArray, judge_ids: Sequence[str]
) -> BoolArray:
    """Which characters the panel marks, from ``covered`` ``(n_span_judges, n_chars)``."""
    if covered.shape[0] == 0:
        return np.zeros(covered.shape[1], dtype=bool)
    return np.asarray(
        rule.spans.entry.fn(covered, weights, rule.spans.param, judge_ids, rule.span_fit),
        dtype=bool,
    )


def decide_verdict(rule: ConsensusRule, ballot: Ballot) -> bool:
    if rule.verdict.name == "auto":
        raise RuleError("resolve verdict 'auto' against the panel first (ConsensusRule.resolve)")
    if ballot.fit is None and rule.verdict_fit is not None:
        ballot = replace(ballot, fit=rule.verdict_fit)
    if ballot.stack is None and rule.stack is not None:
        ballot = replace(ballot, stack=rule.stack)
    return bool(rule.verdict.entry.fn(ballot, rule.verdict.param))
