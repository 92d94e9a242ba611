"""A judge backed by an offline detector: no network, no model, same Judgment contract."""

from __future__ import annotations

import time

from juryflow.judges.detectors.registry import Detector
from juryflow.maths.records import Item, Judgment, OutputKind, Span, unscored


class OfflineJudge:
    """Runs a :class:`Detector` on one item's reference and response.

    A span-only judge: its score is 1.0 when it flags anything and 0.0 otherwise, the same
    rule the panel applies to span-returning LLM judges, so verdicts stay comparable.
    """

    output_kind: OutputKind = "spans"

    def __init__(
        self,
        judge_id: str,
        detector: Detector,
        reference_variable: str = "reference",
        response_variable: str = "response",
    ) -> None:
        self.judge_id = judge_id
        self.detector = detector
        self.reference_variable = reference_variable
        self.response_variable = response_variable

    async def judge(self, item: Item) -> Judgment:
        # Detectors take milliseconds: no point handing them to a thread.
        return self.judge_sync(item)

    def _reference(self, item: Item) -> str:
        """What the response is checked against: a QA row's question (a column of its own,
        kept with the item) before its passages, since an answer may restate the question's
        words, which are no invention."""
        reference = item.variables[self.reference_variable]
        question = item.variables.get("question") or item.metadata.get("question")
        if question and isinstance(question, str) and question not in reference:
            return f"{question}\n\n{reference}"
        return reference

    def judge_sync(self, item: Item) -> Judgment:
        started = time.perf_counter()
        model = f"detector:{self.detector.name}"
        # A missing reference is a mapping mistake too: judged against "", every claim
        # would look unsupported.
        for name in (self.response_variable, self.reference_variable):
            if name not in item.variables:
                reason = f"missing variable {name!r} (map it with --map {name}=COLUMN)"
                return unscored(
                    item.item_id, self.judge_id, self.output_kind, reason,
                    provider="offline", model=model, prompt_name=None,
                )  # fmt: skip
        response = item.variables[self.response_variable]
        if not response.strip():
            return unscored(
                item.item_id, self.judge_id, self.output_kind, "empty response",
                provider="offline", model=model, prompt_name=None,
            )  # fmt: skip
        offsets = self.detector.detect(self._reference(item), response)
        spans = tuple(Span(s, e, response[s:e], "detector") for s, e in offsets)
        return Judgment(
            item_id=item.item_id,
            judge_id=self.judge_id,
            output_kind=self.output_kind,
            score=1.0 if spans else 0.0,
            spans=spans,
            latency_ms=(time.perf_counter() - started) * 1000.0,
            provider="offline",
            model=model,
            prompt_name=None,
        )
