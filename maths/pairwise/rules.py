"""Named panel rules for pairwise preferences: a panel's item verdicts become one per item.

Registered by name with :func:`preference_rule` (as the consensus reducers of
:mod:`juryflow.maths.reducers` are), so that a panel file, the command line and the store
can spell a rule. Every rule takes the ``(n_judges, n_items)`` item verdicts of
:func:`~.records.item_verdicts` and returns one code per item in ``A``, ``B``, ``TIE`` or
``MISSING`` (no consistent verdict to decide from: *insufficient*).

Only **consistent** verdicts vote. An inconsistent judge abstains instead of counting as a
tie: it answered the position, not the content, and a tie vote would pull a real preference
towards "no difference". A missing judge abstains too.

- ``majority``: the plurality of the consistent verdicts, a tie verdict being a class of
  its own. A draw at the top (A and B equally often, or either level with ties) is a
  ``TIE``: the panel did not prefer one answer over the other. No consistent verdict:
  ``MISSING``.
- ``dawid_skene``: the three-class Dawid–Skene model (Dawid & Skene 1979) fitted by EM on
  the consistent verdicts: each judge has a 3×3 confusion matrix (P(says l | truth k)),
  the items a prior over A/B/tie; an item's consensus is its most probable class, a draw
  between A and B again a tie. As in :func:`juryflow.maths.reliability.dawid_skene`, fewer
  than three judges leave the model unidentified, so EM is not run then and the answer is
  the (soft) majority; degenerate inputs give notes, never exceptions.

Both rules treat the labels alike (relabelling A↔B mirrors the result), which the tests
check; the EM's Dirichlet smoothing is symmetric for that reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from juryflow.maths.names import did_you_mean
from juryflow.maths.pairwise.records import MISSING, TIE, A, B, Codes, class_counts, item_codes

FloatArray = npt.NDArray[np.float64]
RuleFn = Callable[..., "PreferenceConsensus"]

_DRAW = 1e-9
"""Support within this of each other is a draw (float noise must not pick a side)."""


class PreferenceRuleError(ValueError):
    """A preference rule that cannot be used, with a message naming the fix."""


@dataclass(frozen=True, slots=True, eq=False)
class PreferenceConsensus:
    """A panel's preference on each item, and what it rests on."""

    rule: str
    """The registered name of the rule that decided."""
    codes: Codes
    """``(n_items,)``: ``A``, ``B``, ``TIE`` or ``MISSING`` (insufficient)."""
    support: FloatArray
    """``(n_items, 3)``: the weight of A, B and tie per item (vote shares for ``majority``,
    posteriors for ``dawid_skene``); NaN rows where no judge was consistent."""
    n_voters: npt.NDArray[np.int64]
    """``(n_items,)``: judges with a consistent verdict on the item."""
    notes: tuple[str, ...] = ()
    """Sentences about anything degenerate (a rule never raises on odd data)."""
    confusion: FloatArray | None = None
    """``dawid_skene`` only: ``(n_judges, 3, 3)`` P(judge says l | truth k), rows k."""
    prior: FloatArray | None = None
    """``dawid_skene`` only: the fitted share of items whose truth is A, B, tie."""


@dataclass(frozen=True, slots=True)
class _Entry:
    fn: RuleFn
    doc: str


_RULES: dict[str, _Entry] = {}


def preference_rule(name: str) -> Callable[[RuleFn], RuleFn]:
    """Register ``fn(items, **options) -> PreferenceConsensus`` as preference rule ``name``."""

    def register(fn: RuleFn) -> RuleFn:
        doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        _RULES[name] = _Entry(fn, doc)
        return fn

    return register


def preference_rule_names() -> list[str]:
    """The registered names.

    >>> preference_rule_names()
    ['dawid_skene', 'majority']
    """
    return sorted(_RULES)


def describe_preference_rules() -> dict[str, str]:
    """Every registered rule with its one-line description (for ``--help``)."""
    return {name: entry.doc for name, entry in sorted(_RULES.items())}


def apply_preference_rule(name: str, items: npt.ArrayLike, **options: Any) -> PreferenceConsensus:
    """The consensus of rule ``name`` over ``(n_judges, n_items)`` item verdicts.

    >>> apply_preference_rule("majority", [[0, 1], [0, 2], [3, 2]]).codes.tolist()
    [0, 2]
    """
    entry = _RULES.get(name)
    if entry is None:
        known = ", ".join(preference_rule_names())
        hint = did_you_mean(name, preference_rule_names())
        raise PreferenceRuleError(f"unknown preference rule {name!r}{hint}; use one of: {known}")
    return entry.fn(_items(items), **options)


def _items(items: npt.ArrayLike) -> Codes:
    v = np.asarray(items)
    if v.ndim == 1 and v.size == 0:
        v = v.reshape(0, 0)
    if v.ndim != 2:
        raise ValueError(f"item verdicts must be 2-d (n_judges, n_items), got shape {v.shape}")
    return item_codes(v)


def decide(support: FloatArray) -> Codes:
    """Codes from ``(n_items, 3)`` support: the unique largest class, a draw at the top a
    tie, a row without support (all NaN or zero) missing.

    >>> decide(np.array([[2.0, 1, 0], [1, 1, 0], [1, 0, 1], [0, 0, 0]])).tolist()
    [0, 2, 2, -1]
    """
    s = np.nan_to_num(np.asarray(support, dtype=np.float64), nan=0.0)
    if s.shape[0] == 0:
        return np.zeros(0, dtype=np.int8)
    top = s.max(axis=1)
    at_top = s >= top[:, None] - _DRAW * np.maximum(top[:, None], 1.0)
    unique = at_top.sum(axis=1) == 1
    code = np.where(unique, np.argmax(s, axis=1), TIE)
    return np.asarray(np.where(top > 0, code, MISSING), dtype=np.int8)


@preference_rule("majority")
def majority(items: Codes) -> PreferenceConsensus:
    """The plurality of the consistent verdicts; a draw at the top is a tie.

    Inconsistent and missing judges abstain; an item nobody judged consistently is
    ``MISSING``.

    >>> majority(np.array([[0, 0, 3], [1, 2, -1], [0, 2, 3]], dtype=np.int8)).codes.tolist()
    [0, 2, -1]
    """
    counts = class_counts(items).astype(np.float64)
    voters = counts.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = counts / voters[:, None]
    notes = []
    if items.size and not (voters > 0).any():
        notes.append("no judge gave a consistent verdict on any item: nothing to decide")
    return PreferenceConsensus(
        rule="majority",
        codes=decide(share),
        support=share,
        n_voters=voters.astype(np.int64),
        notes=tuple(notes),
    )


@preference_rule("dawid_skene")
def dawid_skene(
    items: Codes, *, max_iter: int = 200, tol: float = 1e-7, prior: float = 1.0
) -> PreferenceConsensus:
    """Three-class Dawid–Skene (A, B, tie) by EM over the consistent verdicts.

    ``prior`` is the symmetric Dirichlet pseudo-count added to every cell of each judge's
    confusion matrix and to the class prior, so a judge seen on few items stays near chance
    instead of being trusted absolutely. EM starts from the soft majority and stops when no
    rate moves by more than ``tol``.

    Three judges on 18 items, one of which always says A; the other two carry the items
    (on six items alone the smoothing, 27 pseudo-counts, would outweigh the data):

    >>> v = np.tile([[0, 1, 1, 0, 2, 1], [0, 1, 1, 0, 2, 1], [0] * 6], 3).astype(np.int8)
    >>> dawid_skene(v).codes[:6].tolist()
    [0, 1, 1, 0, 2, 1]
    """
    if prior <= 0 or not np.isfinite(prior):
        raise ValueError(f"prior must be a positive pseudo-count, got {prior}")
    n_items = items.shape[1]
    # (n_judges, n_items, 3) one-hot of the consistent verdicts.
    obs = np.stack([(items == k) for k in (A, B, TIE)], axis=2).astype(np.float64)
    counts = obs.sum(axis=0)
    voters = counts.sum(axis=1)
    used = voters > 0
    active = obs[:, used].sum(axis=(1, 2)) > 0
    n_active = int(active.sum())
    notes: list[str] = [f"judge {j} gave no consistent verdict" for j in np.flatnonzero(~active)]
    support = np.full((n_items, 3), np.nan)
    if not used.any():
        if n_items:
            notes.append("no judge gave a consistent verdict on any item: nothing to fit")
        return PreferenceConsensus(
            "dawid_skene",
            np.full(n_items, MISSING, dtype=np.int8),
            support,
            voters.astype(np.int64),
            tuple(notes),
        )
    x = obs[:, used]
    q = counts[used] / voters[used, None]

    def m_step(q: FloatArray) -> tuple[FloatArray, FloatArray]:
        # confusion[j, k, l] ∝ Σ_n q[n, k] x[j, n, l] + prior
        table = np.einsum("nk,jnl->jkl", q, x) + prior
        confusion = table / table.sum(axis=2, keepdims=True)
        pi = (q.sum(axis=0) + prior) / (q.shape[0] + 3 * prior)
        return confusion, pi

    def e_step(confusion: FloatArray, pi: FloatArray) -> FloatArray:
        log = np.log(pi)[None, :] + np.einsum("jnl,jkl->nk", x, np.log(confusion))
        log -= log.max(axis=1, keepdims=True)
        p = np.exp(log)
        return np.asarray(p / p.sum(axis=1, keepdims=True))

    confusion, pi = m_step(q)
    identified = n_active >= 3
    converged = False
    for _ in range(max_iter if identified else 0):
        q = e_step(confusion, pi)
        new_confusion, new_pi = m_step(q)
        change = max(
            float(np.abs(new_confusion - confusion).max()), float(np.abs(new_pi - pi).max())
        )
        confusion, pi = new_confusion, new_pi
        if change <= tol:
            converged = True
            break
    if identified:
        q = e_step(confusion, pi)
    else:
        notes.append(
            f"only {n_active} judge{'s' if n_active != 1 else ''} gave consistent verdicts: "
            "the model needs at least three to tell accuracy from prevalence, so EM was not "
            "run; the consensus is the majority and the confusion matrices agreement with it"
        )
    if identified and not converged and max_iter > 0:
        notes.append(f"EM did not converge within {max_iter} iterations")
    accuracy = np.einsum("jkk->jk", confusion)[active].mean(axis=0)
    for k, name in ((A, "A"), (B, "B"), (TIE, "tie")):
        if accuracy[k] < 1 / 3:
            notes.append(
                f"the judges are on average worse than chance on class {name}: EM may have "
                "swapped classes, read the consensus with care"
            )
    said = x.sum(axis=(0, 1))
    if (said == 0).sum() >= 2:
        notes.append("every consistent verdict is the same class: the fit cannot tell the "
                     "judges' accuracy from the prevalence")  # fmt: skip
    support[used] = q
    return PreferenceConsensus(
        rule="dawid_skene",
        codes=decide(support),
        support=support,
        n_voters=voters.astype(np.int64),
        notes=tuple(notes),
        confusion=confusion,
        prior=pi,
    )
