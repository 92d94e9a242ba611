"""The judge interface: one method, one item in, one judgment out."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from juryflow.maths.records import Item, Judgment, OutputKind


@runtime_checkable
class Judge(Protocol):
    """Anything that can judge an item.

    ``judge`` never raises for a per-item failure (a provider error, a timeout, output that
    is not JSON): it returns an unscored :class:`Judgment` carrying the reason, so that one
    bad call costs one row and nothing else.
    """

    judge_id: str
    output_kind: OutputKind

    async def judge(self, item: Item) -> Judgment: ...
