"""Pairwise verdicts as small integers, and a judge's item verdict from its two orders.

A pairwise judge sees two candidate answers for one item and says which is better. Every
judge is asked twice, in the original order (A shown first, B second) and swapped (B shown
first, A second), because LLM judges favour a position: only a preference that survives the
swap is the judge's preference for the *content*.

Codes (``int8`` so that a panel of judges over many items stays small):

- ``A = 0``, ``B = 1``: that answer is better. In the swapped order the judge's raw "A" is
  the answer shown first, which is the original B: :func:`from_swapped` maps it back;
- ``TIE = 2``: neither is better;
- ``INCONSISTENT = 3`` (item verdicts only): both orders answered but, mapped back, they
  disagree. A state of its own, counted, never silently made a tie: a judge that flips with
  the order has told us about its position bias, not about the answers;
- ``MISSING = -1``: no answer (a failed call, an unparsable reply); for an item verdict,
  either order missing. Rules also use it for "no consensus possible" (insufficient).

A raw verdict in the order it was *shown* is also a Bradley–Terry outcome: ``A`` is "the
first-shown answer won", ``B`` "the second-shown won" (:mod:`.bradley_terry`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Codes = npt.NDArray[np.int8]
IntArray = npt.NDArray[np.int64]

A = 0
"""Answer A is better (raw, in the order shown: the first-shown answer is better)."""
B = 1
"""Answer B is better (raw: the second-shown answer is better)."""
TIE = 2
"""Neither answer is better."""
INCONSISTENT = 3
"""Item verdicts only: the two orders disagree once mapped back to the original labels."""
MISSING = -1
"""No answer; for a consensus, no consistent verdict to decide from (insufficient)."""

VERDICT_NAMES: dict[int, str] = {
    A: "A",
    B: "B",
    TIE: "tie",
    INCONSISTENT: "inconsistent",
    MISSING: "missing",
}
"""The name of each code, as reports and the store spell it."""

PREFERENCE_WORDS: tuple[tuple[str, float, str], ...] = (
    ("A", 0.0, "A better"),
    ("tie", 0.5, "tie"),
    ("B", 1.0, "B better"),
)
"""Each verdict of a pairwise judgment: its name in summaries, its score (B's share of the
win), and the words every face (terminal, viewer, report) shows for it."""

_RAW_CODES = (MISSING, A, B, TIE)
_ITEM_CODES = (MISSING, A, B, TIE, INCONSISTENT)
_BY_LABEL: dict[str, int] = {"a": A, "b": B, "tie": TIE, "": MISSING, "missing": MISSING}


def _codes(values: npt.ArrayLike, allowed: tuple[int, ...], name: str) -> Codes:
    v = np.asarray(values)
    if v.dtype.kind == "f":
        if not np.isfinite(v).all() or (v != np.round(v)).any():
            raise ValueError(f"{name} must hold integer verdict codes")
    elif v.size and v.dtype.kind not in "iub":
        raise ValueError(f"{name} must hold integer verdict codes, got dtype {v.dtype}")
    out = v.astype(np.int8)
    if out.size and not np.isin(out, allowed).all():
        raise ValueError(f"{name} holds codes outside {sorted(allowed)}")
    return out


def raw_codes(values: npt.ArrayLike, name: str = "verdicts") -> Codes:
    """Validated raw verdict codes (``A``, ``B``, ``TIE``, ``MISSING``) as ``int8``.

    >>> raw_codes([0, 1, 2, -1]).tolist()
    [0, 1, 2, -1]
    """
    return _codes(values, _RAW_CODES, name)


def item_codes(values: npt.ArrayLike, name: str = "item verdicts") -> Codes:
    """Validated item verdict codes (raw codes plus ``INCONSISTENT``) as ``int8``."""
    return _codes(values, _ITEM_CODES, name)


def parse_verdicts(labels: Iterable[str | None]) -> Codes:
    """Codes from labels ``"A"``, ``"B"``, ``"tie"`` (any case), ``None``/``""`` missing.

    The one place a label becomes a code, so that "a" and "Tie" are not new classes.

    >>> parse_verdicts(["A", "b", "Tie", None]).tolist()
    [0, 1, 2, -1]
    """
    out: list[int] = []
    for label in labels:
        key = "" if label is None else str(label).strip().lower()
        if key not in _BY_LABEL:
            raise ValueError(f"unknown pairwise verdict {label!r}; use A, B or tie")
        out.append(_BY_LABEL[key])
    return np.asarray(out, dtype=np.int8)


def mirror(codes: npt.ArrayLike) -> Codes:
    """Swap the labels A and B; tie, inconsistent and missing stay as they are.

    What relabelling the two answers does to any verdict or consensus, so a rule that
    treats the answers alike must commute with it (the tests check every rule does).

    >>> mirror([0, 1, 2, 3, -1]).tolist()
    [1, 0, 2, 3, -1]
    """
    c = item_codes(codes, "codes")
    return np.asarray(np.where(c == A, B, np.where(c == B, A, c)), dtype=np.int8)


def from_swapped(swapped: npt.ArrayLike) -> Codes:
    """A verdict given in the swapped order (B shown first) in the original labels.

    The swapped prompt calls the original B "A": its raw "A" means original B, and the other
    way round; a tie is a tie and a missing answer stays missing.

    >>> from_swapped([0, 1, 2, -1]).tolist()
    [1, 0, 2, -1]
    """
    return mirror(raw_codes(swapped, "swapped verdicts"))


def item_verdicts(first: npt.ArrayLike, second: npt.ArrayLike) -> Codes:
    """Each judge's verdict on each item from its two orders, ``(n_judges, n_items)``.

    ``first`` is the raw verdict in the original order (A shown first) and ``second`` the raw
    verdict in the swapped order (B shown first, *as the judge gave it*: mapped back here),
    both ``(n_judges, n_items)`` (any equal shapes work). The result is the common verdict
    when the two agree, ``INCONSISTENT`` when both are present and disagree, ``MISSING`` when
    either is missing: one order alone cannot tell a preference from a position bias.

    Judge 0: A twice (the swapped "B" is the original A); then A vs B, a flip; then a tie
    with a missing swapped answer:

    >>> item_verdicts([[0, 0, 2]], [[1, 0, -1]]).tolist()
    [[0, 3, -1]]
    """
    f = raw_codes(first, "first")
    s = from_swapped(second)
    if f.shape != s.shape:
        raise ValueError(f"first and second differ in shape: {f.shape} vs {s.shape}")
    missing = (f == MISSING) | (s == MISSING)
    out = np.where(missing, MISSING, np.where(f == s, f, INCONSISTENT))
    return np.asarray(out, dtype=np.int8)


@dataclass(frozen=True, slots=True)
class Consistency:
    """How one judge's item verdicts split: what its share of flips is a share of."""

    consistent: int
    """Items where both orders were answered and agree (A, B or tie)."""
    inconsistent: int
    """Items where both orders were answered and disagree."""
    missing: int
    """Items with at least one order unanswered."""

    @property
    def answered(self) -> int:
        """Items with both orders answered."""
        return self.consistent + self.inconsistent


def consistency(items: npt.ArrayLike) -> tuple[Consistency, ...]:
    """Per judge (row of ``(n_judges, n_items)`` item verdicts), the counts of each state.

    >>> consistency([[0, 3, -1, 2]])
    (Consistency(consistent=2, inconsistent=1, missing=1),)
    """
    v = item_codes(np.atleast_2d(np.asarray(items)), "item verdicts")
    good = ((v >= A) & (v <= TIE)).sum(axis=1)
    bad = (v == INCONSISTENT).sum(axis=1)
    gone = (v == MISSING).sum(axis=1)
    return tuple(
        Consistency(int(c), int(i), int(m)) for c, i, m in zip(good, bad, gone, strict=True)
    )


def class_counts(items: npt.ArrayLike) -> IntArray:
    """``(n_items, 3)`` counts of consistent A, B and tie verdicts per item (column).

    What every consensus rule starts from; inconsistent and missing judges count nowhere.

    >>> class_counts([[0, 1], [0, 3], [2, -1]]).tolist()
    [[2, 0, 1], [0, 1, 0]]
    """
    v = item_codes(np.atleast_2d(np.asarray(items)), "item verdicts")
    return np.stack([(v == k).sum(axis=0) for k in (A, B, TIE)], axis=1).astype(np.int64)
