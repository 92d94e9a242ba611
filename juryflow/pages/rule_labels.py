"""Which rule made each consensus number, in words every face shows beside the number.

A run's consensus has two values made by two different rules: a score (the rule's score
reducer, e.g. the median) and a verdict (its verdict rule, e.g. "the span union marks
something"). Shown as "consensus score 0.00" beside "consensus hallucinated" they seem to
disagree; shown as "median score 0.00" and "hallucinated — spans: union" the reader sees
why. Nothing here computes a consensus: the verdict, the score and the counts are the
stored ones, and these functions only say which rule they came from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from juryflow.maths.reducers import ConsensusRule, RuleError, RuleRef
from juryflow.storage.reads.consensus_facts import ConsensusFacts as ItemFacts

UNLOCALISED_NOTE = "unlocalised: the judges agree something is wrong, not where"


@dataclass(frozen=True, slots=True)
class RunRule:
    """A run's stored consensus rule, as the labels need it (names as panels spell them)."""

    score: str
    """The score reducer: ``median``, ``mean``, ..."""
    spans: str
    """The span reducer: ``union``, ``majority``, ``at_least:2``, ..."""
    verdict: str
    """The verdict rule as stored with the run; ``auto`` until an item resolves it."""

    @classmethod
    def of(cls, raw: Mapping[str, Any] | None) -> RunRule:
        """The rule stored with a run (``runs.consensus``); the defaults for a run of an
        older juryflow that stored none, or one this version cannot read.

        >>> RunRule.of({"score": "median", "spans": "union", "verdict": "spans"})
        RunRule(score='median', spans='union', verdict='spans')
        >>> RunRule.of(None).spans
        'majority'
        """
        try:
            rule = ConsensusRule.from_dict(raw)
        except RuleError:
            rule = ConsensusRule()
        return cls(str(rule.score), str(rule.spans), str(rule.verdict))

    def score_label(self) -> str:
        """What the consensus score is: ``median score``."""
        return f"{self.score} score"

    def run_verdict_label(self, verdict_rules: Sequence[str]) -> str:
        """The rule behind a run's verdicts: the one its items were decided by
        (``verdict_rules``, which resolve a stored ``auto``), else the stored one."""
        return self.verdict_label(verdict_rules[0] if len(verdict_rules) == 1 else None)

    def verdict_label(self, verdict_rule: str | None = None) -> str:
        """The verdict's rule in a few words: ``spans: union``, ``majority of verdicts``.

        ``verdict_rule`` is an item's resolved rule (``consensus.verdict_rule``); without
        it the run's own (which may still be ``auto``).

        >>> r = RunRule("median", "union", "auto")
        >>> r.verdict_label("spans"), r.verdict_label("majority"), r.verdict_label()
        ('spans: union', 'majority of verdicts', 'auto (spans: union for span judges, else majority of verdicts)')
        """  # noqa: E501
        name, _, param = (verdict_rule or self.verdict).partition(":")
        if name == "spans":
            return f"spans: {self.spans}"
        if name == "auto":
            return f"auto (spans: {self.spans} for span judges, else majority of verdicts)"
        if name == "majority":
            return "majority of verdicts"
        if name == "at_least":
            return f"at least {param or 1} verdicts"
        if name == "weighted":
            return f"weighted verdicts over {param or '0.5'} of the weight"
        if name == "score":
            return f"{self.score} score at or above {param or '0.5'}"
        if name == "dawid_skene":
            return f"Dawid–Skene posterior over {param or '0.5'}"
        return name


def verdict_word(value: bool | None) -> str:
    return "–" if value is None else ("hallucinated" if value else "clean")


def _spans_reason(rule: RunRule, facts: ItemFacts) -> str:
    n = facts.n_span_judges
    ref = _ref("spans", rule.spans)
    name = ref.name if ref else rule.spans
    param = ref.param if ref else None
    if facts.hallucinated:
        found = f"{facts.n_consensus_spans} span{'s' if facts.n_consensus_spans != 1 else ''}"
        if name == "union":
            return f"spans: union marks {found} (characters any judge marked)"
        if name in ("majority", "at_least"):
            k = n // 2 + 1 if name == "majority" else int(param or 1)
            return f"spans: {rule.spans} marks {found} (characters {k} of {n} judges marked)"
        return f"spans: {rule.spans} marks {found}"
    if n == 0:
        return f"spans: {rule.spans} had no span judge's answer to read"
    if name == "union":
        return f"spans: union found no character marked by any of {n} judges"
    if name == "majority":
        return f"spans: majority overlap found no character marked by {n // 2 + 1} of {n} judges"
    if name == "at_least":
        k = int(param or 1)
        return f"spans: at_least:{k} found no character marked by {k} of {n} judges"
    if name == "weighted":
        return (
            f"spans: {rule.spans} found no character marked by judges holding more than "
            f"{param if param is not None else 0.5:g} of the weight"
        )
    return f"spans: {rule.spans} marked no character"


def _ref(family: Any, text: str) -> RuleRef | None:
    try:
        return RuleRef.parse(family, text)
    except RuleError:
        return None


def verdict_why(rule: RunRule, facts: ItemFacts) -> str:
    """The rule behind the stored verdict and what it went by, to follow the verdict's word:
    ``— spans: union marks 2 spans (characters any judge marked)``. No verdict is decided
    here: ``facts.hallucinated`` is the stored one.

    >>> facts = ItemFacts(False, "spans", True, 0, 3, 3, 2, 1.0)
    >>> verdict_why(RunRule("median", "majority", "spans"), facts)
    '— spans: majority overlap found no character marked by 2 of 3 judges'
    """
    if facts.hallucinated is None:
        return "(no consensus)"
    rule_name = facts.verdict_rule or rule.verdict
    name, _, param = rule_name.partition(":")
    said = f"{facts.n_said_hallucinated} of {facts.n_scored} judges said hallucinated"
    if name == "spans":
        why = _spans_reason(rule, facts)
    elif name == "majority":
        why = f"majority of verdicts: {said}"
    elif name == "at_least":
        why = f"at least {param or 1} verdicts: {said}"
    elif name == "score":
        score = "–" if facts.score is None else f"{facts.score:.2f}"
        side = "at or above" if facts.hallucinated else "below"
        why = f"{rule.score} score {score} is {side} {param or '0.5'}"
    else:
        why = f"{rule.verdict_label(rule_name)}: {said}"
    return f"— {why}"


def verdict_reason(rule: RunRule, facts: ItemFacts) -> str:
    """The stored verdict and why, in the rule's own terms.

    >>> facts = ItemFacts(False, "spans", True, 0, 3, 3, 2, 1.0)
    >>> verdict_reason(RunRule("median", "majority", "spans"), facts)
    'clean — spans: majority overlap found no character marked by 2 of 3 judges'
    >>> verdict_reason(RunRule("median", "union", "spans"), ItemFacts(True, "spans", False, 2, 3, 3, 1))
    'hallucinated — spans: union marks 2 spans (characters any judge marked)'
    >>> verdict_reason(RunRule("median", "union", "auto"), ItemFacts(True, "majority", False, 0, 0, 3, 2))
    'hallucinated — majority of verdicts: 2 of 3 judges said hallucinated'
    """  # noqa: E501
    return f"{verdict_word(facts.hallucinated)} {verdict_why(rule, facts)}"


def consensus_line(median: float | None, rule: RunRule, facts: ItemFacts | None) -> str:
    """One line for a consensus: its stored median score, then the verdict with the rule
    that made it, and the unlocalised mark.

    >>> consensus_line(1.0, RunRule("median", "majority", "spans"),
    ...                ItemFacts(False, "spans", True, 0, 3, 3, 2, 1.0))  # doctest: +ELLIPSIS
    'median score 1.00 · clean — spans: majority overlap ... · ⚑ unlocalised: the judges ...'
    """
    score = "–" if median is None else f"{median:.2f}"
    if facts is None:
        return f"median score {score}"
    line = f"median score {score} · {verdict_reason(rule, facts)}"
    return line + (f" · ⚑ {UNLOCALISED_NOTE}" if facts.unlocalised else "")
