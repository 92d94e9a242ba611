"""What a request to the items, item and annotation URLs asks for, checked.

Every value is checked against a closed list or a pattern; a bad one raises
:class:`RequestError` with a one-line message naming what to send instead (the page
answers 400 with it). Empty values count as absent, as an HTML form sends its unset fields.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

from juryflow.storage.annotations import NewAnnotation, SpanDecision
from juryflow.storage.reads.item_queries import SORTS, ItemFilter, ItemOrder

DEFAULT_PER_PAGE = 50
MAX_PER_PAGE = 500
MAX_QUERY_CHARS = 200
MAX_NOTE_CHARS = 10_000
VERDICTS = {"hallucinated": True, "clean": False}
ORDERS = {"desc": True, "asc": False}
_FLAGS = ("split", "unscored", "gold_mismatch", "insufficient")
_SPAN = re.compile(r"(\d{1,9})-(\d{1,9})")


class RequestError(ValueError):
    """A parameter the viewer cannot use; the message says what to send instead."""


@dataclass(frozen=True, slots=True)
class ItemsQuery:
    """The items page's sort, filters and page, as the URL gives them."""

    sort: str = "disagreement"
    order: str = "desc"
    page: int = 1
    per_page: int = DEFAULT_PER_PAGE
    q: str = ""
    verdict_judge: str = ""
    verdict: str = ""
    split: bool = False
    unscored: bool = False
    gold_mismatch: bool = False
    insufficient: bool = False

    @property
    def item_filter(self) -> ItemFilter:
        return ItemFilter(
            verdict_judge=self.verdict_judge or None,
            verdict=VERDICTS.get(self.verdict),
            split=self.split,
            unscored=self.unscored,
            gold_mismatch=self.gold_mismatch,
            insufficient=self.insufficient,
            q=self.q or None,
        )

    @property
    def item_order(self) -> ItemOrder:
        return ItemOrder(self.sort, ORDERS[self.order])

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page

    @property
    def filtered(self) -> bool:
        return self.item_filter != ItemFilter()

    def pairs(self) -> list[tuple[str, str]]:
        """The parameters that differ from the defaults, in a stable order."""
        default = ItemsQuery()
        found: list[tuple[str, str]] = []
        for name in ("sort", "order", "q", "verdict_judge", "verdict"):
            value = getattr(self, name)
            if value != getattr(default, name):
                found.append((name, value))
        found += [(name, "1") for name in _FLAGS if getattr(self, name)]
        if self.per_page != default.per_page:
            found.append(("per_page", str(self.per_page)))
        if self.page != 1:
            found.append(("page", str(self.page)))
        return found

    def query_string(self, **changes: Any) -> str:
        """``self`` with ``changes`` (fields), as a URL query string (no leading ``?``)."""
        return urlencode(replace(self, **changes).pairs())


def _one(params: Mapping[str, str], name: str) -> str:
    return params.get(name, "").strip()


def _flag(params: Mapping[str, str], name: str) -> bool:
    value = _one(params, name)
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    raise RequestError(f"{name}={value!r} is not a flag; use {name}=1 or leave it out")


def _positive(params: Mapping[str, str], name: str, default: int, maximum: int) -> int:
    value = _one(params, name)
    if not value:
        return default
    if not value.isdigit() or not 1 <= int(value) <= maximum:
        raise RequestError(f"{name}={value[:40]!r} is not a number from 1 to {maximum:,}")
    return int(value)


def _choice(params: Mapping[str, str], name: str, choices: Iterable[str], default: str) -> str:
    value = _one(params, name)
    if not value:
        return default
    allowed = list(choices)
    if value not in allowed:
        raise RequestError(f"{name}={value[:40]!r} is not one of {', '.join(allowed)}")
    return value


def parse_items_query(params: Mapping[str, str], judges: Sequence[str]) -> ItemsQuery:
    """The items query in ``params`` (a request's query parameters); ``judges``: the run's.

    Parameters it does not know (``id``, ``queue``: the item page's) are left alone.
    """
    q = params.get("q", "").strip()
    if len(q) > MAX_QUERY_CHARS:
        raise RequestError(f"q is {len(q):,} characters long; search for at most {MAX_QUERY_CHARS}")
    verdict_judge = _one(params, "verdict_judge")
    if verdict_judge and verdict_judge not in judges:
        shown = ", ".join(judges) or "(none)"
        raise RequestError(
            f"verdict_judge={verdict_judge[:60]!r} is not a judge of this run; use one of {shown}"
        )
    verdict = _choice(params, "verdict", VERDICTS, "")
    if bool(verdict_judge) != bool(verdict):
        raise RequestError(
            "verdict_judge and verdict go together: give both "
            "(verdict_judge=JUDGE&verdict=hallucinated|clean) or neither"
        )
    return ItemsQuery(
        sort=_choice(params, "sort", SORTS, "disagreement"),
        order=_choice(params, "order", ORDERS, "desc"),
        page=_positive(params, "page", 1, 10_000_000),
        per_page=_positive(params, "per_page", DEFAULT_PER_PAGE, MAX_PER_PAGE),
        q=q,
        verdict_judge=verdict_judge,
        verdict=verdict,
        **{name: _flag(params, name) for name in _FLAGS},
    )


def parse_item_id(params: Mapping[str, str]) -> str:
    item_id = params.get("id", "")
    if not item_id:
        raise RequestError("no item given; open /runs/RUN/item?id=ITEM_ID")
    return item_id


def _spans(values: Iterable[str], name: str, text_length: int) -> list[tuple[int, int]]:
    spans = []
    for raw in values:
        value = raw.strip()
        if not value:
            continue
        found = _SPAN.fullmatch(value)
        if found is None:
            raise RequestError(f"{name}={value[:40]!r} is not START-END (character offsets)")
        start, end = int(found.group(1)), int(found.group(2))
        if not 0 <= start < end <= text_length:
            raise RequestError(
                f"{name}={value} is outside the judged text (0-{text_length}); "
                "select the span again"
            )
        spans.append((start, end))
    return spans


@dataclass(frozen=True, slots=True)
class AnnotationForm:
    """What the adjudication form posted, checked (see :func:`parse_annotation_form`)."""

    item_id: str
    decisions: tuple[SpanDecision, ...]
    missed: tuple[tuple[int, int], ...]
    verdict: bool | None
    note: str
    queue: bool

    def annotation(self, run_id: str, reviewer: str) -> NewAnnotation:
        return NewAnnotation(
            run_id=run_id,
            item_id=self.item_id,
            reviewer=reviewer,
            decisions=self.decisions,
            missed=self.missed,
            verdict=self.verdict,
            note=self.note,
        )


def form_item_id(form: Mapping[str, str]) -> str:
    item_id = form.get("item_id", "")
    if not item_id:
        raise RequestError("the form has no item_id; submit it from the item's page")
    return item_id


def parse_annotation_form(
    getlist: Mapping[str, list[str]],
    consensus_spans: Iterable[tuple[int, int]],
    text_length: int,
) -> AnnotationForm:
    """The annotation posted as ``getlist`` (field -> its values).

    ``accept`` / ``reject`` take ``START-END`` of the item's consensus spans; the form's
    radio groups post the same decision as ``span-START-END=accept|reject`` (a radio
    group has one name per span). ``missed``: spans the reviewer marked, inside the text.
    """

    def values(name: str) -> list[str]:
        return getlist.get(name, [])

    def one(name: str) -> str:
        found = values(name)
        return found[-1] if found else ""

    item_id = one("item_id")
    if not item_id:
        raise RequestError("the form has no item_id; submit it from the item's page")
    known = set(consensus_spans)
    accepted = _spans(values("accept"), "accept", text_length)
    rejected = _spans(values("reject"), "reject", text_length)
    for name, choices in getlist.items():
        if name.startswith("span-"):
            choice = choices[-1] if choices else ""
            if choice not in ("accept", "reject", ""):
                raise RequestError(f"{name}={choice[:20]!r} is not accept, reject or empty")
            if choice:
                decided = _spans([name.removeprefix("span-")], name, text_length)
                (accepted if choice == "accept" else rejected).extend(decided)
    decisions: dict[tuple[int, int], bool] = {}
    for span, accept in [*((s, True) for s in accepted), *((s, False) for s in rejected)]:
        if span not in known:
            raise RequestError(
                f"{span[0]}-{span[1]} is not a consensus span of this item; reload its page"
            )
        if decisions.get(span, accept) != accept:
            raise RequestError(f"{span[0]}-{span[1]} is both accepted and rejected; pick one")
        decisions[span] = accept
    verdict_text = one("verdict").strip() or "unset"
    verdicts: dict[str, bool | None] = {"hallucinated": True, "clean": False, "unset": None}
    if verdict_text not in verdicts:
        raise RequestError(f"verdict={verdict_text[:20]!r} is not hallucinated, clean or unset")
    note = one("note").strip()
    if len(note) > MAX_NOTE_CHARS:
        raise RequestError(
            f"the note is {len(note):,} characters; keep it under {MAX_NOTE_CHARS:,}"
        )
    queue = one("queue").strip()
    if queue not in ("", "0", "1"):
        raise RequestError(f"queue={queue[:20]!r} is not a flag; use queue=1 or leave it out")
    return AnnotationForm(
        item_id=item_id,
        decisions=tuple(SpanDecision(s, e, a) for (s, e), a in sorted(decisions.items())),
        missed=tuple(sorted(set(_spans(values("missed"), "missed", text_length)))),
        verdict=verdicts[verdict_text],
        note=note,
        queue=queue == "1",
    )
