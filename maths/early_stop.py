"""Exact early stopping: whether the judges not yet called could still change an item's result.

A panel need not call every judge on every item: once two judges of a three-judge
strict-majority panel agree, the third cannot change the verdict. This module decides,
for one item, whether the consensus is already fixed whatever the judges not yet called
would answer, so that a run can leave them out without changing its result.

How exactness is proved rather than hoped for. Fix which of the uncalled judges answer
(the others fail, which a judge may always do): every rule accepted here is *monotone* in
each answering judge's input — a higher score, a ``True`` verdict or one more marked
character never lowers the median, a verdict count or a character's votes, so never
unmarks a character nor turns a verdict clean. Each judge's possible answers lie between
two extremes: "score 0, no span" and "score 1, the whole text marked". A monotone result
that is the same at both extremes is the same at every answer in between. Enumerating
every subset of the uncalled judges that may answer (a panel has a handful) and comparing
the result at the two extremes of each is therefore a proof, not a heuristic; the property
tests in ``tests/test_early_stop.py`` check it against random full panels.

"The result" is what the rule decides: status, consensus score, the median score,
verdict, the consensus spans' offsets and text, ``unlocalised`` and the verdict rule.
The other consensus columns describe who answered (``n_answered``, spread, ``chars_any``,
the votes behind each span) and are those of the judges actually called.

Rules outside :data:`EXACT_RULES` (weighted, Dawid–Skene, calibrated weights) are not
monotone in general (a weight fitted below chance turns a vote around) or need the whole
run; for them :func:`refusal` says why and the run calls every judge.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

from juryflow.maths.consensus import item_consensus
from juryflow.maths.records import Consensus, Judgment, OutputKind, Span
from juryflow.maths.reducers import ConsensusRule

EXACT_RULES: dict[str, frozenset[str]] = {
    "score": frozenset({"median", "mean", "trimmed_mean", "preference"}),
    "spans": frozenset({"majority", "at_least", "union"}),
    "verdict": frozenset({"majority", "at_least", "score", "spans", "auto"}),
}
"""The rules whose result is monotone in every judge's answer (see the module's text).
Mean and union are exact too, but rarely decided early: any further answer moves them."""

DEFAULT_AUDIT_FRACTION = 0.1
"""Items judged by every judge anyway, so that agreement is measured on a random sample."""

DecisionKey = tuple[object, ...]


@dataclass(frozen=True, slots=True)
class JudgeShape:
    """What an uncalled judge could answer with: its output kind and verdict threshold."""

    judge_id: str
    output_kind: OutputKind
    verdict_threshold: float


def refusal(rule: ConsensusRule) -> str | None:
    """Why ``rule`` cannot stop early exactly, or None when it can.

    >>> refusal(ConsensusRule.from_dict({"spans": "majority"})) is None
    True
    >>> refusal(ConsensusRule.from_dict({"verdict": "weighted"}))
    'verdict rule weighted is not proved exact (a weight can turn a vote around)'
    """
    for ref in (rule.score, rule.spans, rule.verdict):
        if ref.name not in EXACT_RULES[ref.family]:
            return (
                f"{ref.family} rule {ref.name} is not proved exact "
                "(a weight can turn a vote around)"
            )
    if rule.needs_fit:
        return "the rule is fitted over the whole run"
    return None


def decision(consensus: Consensus) -> DecisionKey:
    """The part of a consensus the rule decides (the rest describes who answered)."""
    return (
        consensus.status,
        consensus.score,
        consensus.score_median,
        consensus.hallucinated,
        tuple((s.char_start, s.char_end, s.text) for s in consensus.spans),
        consensus.unlocalised,
        consensus.verdict_rule,
    )


def _extreme(shape: JudgeShape, item_id: str, text: str, level: float) -> Judgment:
    if shape.output_kind == "spans":
        spans = (Span(0, len(text), text, "exact"),) if level == 1.0 and text else ()
    else:
        spans = ()
    return Judgment(
        item_id=item_id,
        judge_id=shape.judge_id,
        output_kind=shape.output_kind,
        score=level,
        spans=spans,
        verdict_threshold=shape.verdict_threshold,
    )


def _levels(uncalled: Sequence[JudgeShape]) -> tuple[float, ...]:
    """The answers tried for the uncalled judges: the extremes, which bound every monotone
    rule; pairwise judges' tie too, since a plurality of A, tie and B is not monotone in
    one direction (any change of the winner needs one class to gain, which the judges all
    giving that class reaches first)."""
    if any(s.output_kind == "preference" for s in uncalled):
        return (0.0, 0.5, 1.0)
    return (0.0, 1.0)


def is_decided(
    item_id: str,
    called: Sequence[Judgment],
    uncalled: Sequence[JudgeShape],
    n_judges: int,
    text: str,
    quorum: int | None,
    rule: ConsensusRule,
) -> bool:
    """Whether the judges in ``uncalled`` cannot change the item's result, whatever they answer.

    ``called`` holds every answer so far, unscored ones included; the result is then
    :func:`item_consensus` of ``called`` alone, identical in :func:`decision` to the full
    panel's.

    >>> from juryflow.maths.records import Judgment
    >>> two = [Judgment("i", j, "score", 0.9) for j in ("a", "b")]
    >>> third = [JudgeShape("c", "score", 0.5)]
    >>> is_decided("i", two, third, 3, "", None, ConsensusRule())
    True
    >>> split = [Judgment("i", "a", "score", 0.9), Judgment("i", "b", "score", 0.1)]
    >>> is_decided("i", split, third, 3, "", None, ConsensusRule())
    False
    """
    if not uncalled:
        return True
    now = decision(item_consensus(item_id, called, n_judges, text, quorum, rule=rule))
    levels = _levels(uncalled)
    for size in range(1, len(uncalled) + 1):
        for answering in combinations(uncalled, size):
            for level in levels:
                extra = [_extreme(s, item_id, text, level) for s in answering]
                full = item_consensus(item_id, [*called, *extra], n_judges, text, quorum, rule=rule)
                if decision(full) != now:
                    return False
    return True


def in_audit(item_id: str, fraction: float, seed: int | None) -> bool:
    """Whether ``item_id`` is in the run's audit sample (every judge called), by a seeded hash:
    the same items on a resume, on every shard and on every machine.

    >>> in_audit("x", 0.0, 1), in_audit("x", 1.0, 1)
    (False, True)
    """
    if fraction <= 0.0:
        return False
    if fraction >= 1.0:
        return True
    digest = hashlib.sha256(f"{seed or 0}|{item_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def first_round_size(n_judges: int, quorum: int | None) -> int:
    """How many judges every item gets before anything can be decided: the quorum.

    >>> [first_round_size(n, None) for n in (1, 2, 3, 4, 5)]
    [1, 2, 2, 3, 3]
    """
    return quorum if quorum is not None else n_judges // 2 + 1


def ordered(judge_ids: Iterable[str], cost: dict[str, float]) -> list[str]:
    """Judges cheapest first (by ``cost``, an estimate per call), panel order among equals.

    >>> ordered(["a", "b", "c"], {"a": 3.0, "b": 1.0, "c": 1.0})
    ['b', 'c', 'a']
    """
    ids = list(judge_ids)
    return sorted(ids, key=lambda j: (cost.get(j, 0.0), ids.index(j)))
