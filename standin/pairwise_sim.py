"""Simulated *pairwise* judges for the stand-in server: ``stub-sim-pair-...`` models.

A pairwise judge's prompt holds two candidate answers for one input (the
``pairwise_preference`` prompt, say); it answers ``{"reasoning": "<one sentence>",
"verdict": "A" | "B" | "tie"}``, where ``A`` means the answer shown *first* in the prompt is
better, ``B`` the one shown second, ``tie`` neither. The simulated judge knows the truth
from the gold labels (:class:`juryflow.standin.simulator.Gold`) and errs as its name says.

Grammar: ``sim-pair`` followed by ``-<letter><value>`` parameters in any order, each at most
once, values in [0, 1] (parsed by :func:`juryflow.standin.simulator.parse_sim`):

=====  ======================================================================================
param  meaning (default)
=====  ======================================================================================
``a``  accuracy: chance of the true verdict; otherwise one of the other two, uniformly (1)
``P``  position bias: chance, drawn *first*, of answering ``A`` (the first-shown answer)
       whatever the content; only when it does not fire is the accuracy draw made (0)
``b``  broken: chance the answer is truncated JSON, as the other sim families (0)
=====  ======================================================================================

Truth: every gold response (every key of the gold mapping) that occurs in the prompt is a
candidate, one occurring only inside a longer candidate excepted (as :meth:`Gold.find`
prefers the longer text), each of its occurrences counted (one answer shown twice is a
pair of identical answers, an A/A comparison, whose truth is a tie); with exactly two, the
one occurring first is ``A``. Responses the
prompt renders with an escaped tag (``&lt;answer_a&gt;``) are found in the prompt with such
tags unescaped too. The better answer has fewer gold-hallucinated characters (the length of
the union of its gold spans); one with a hallucinated verdict but no spans is worse than any
whose count is known (every clean one included) and as bad as any other such one; equal
counts (both clean, say) are a tie (:func:`better`). With fewer than two candidates (or
more, which cannot be told apart from the input's own quotes), or no gold set, the judge
answers a seeded random verdict, as the other families answer a response they do not know.

Seeding: the RNG is seeded by (server seed, full model name, the prompt's text), the digest
:func:`juryflow.standin.model.answer_seed` makes, so a judge answers one prompt the same way
across runs and the two orders of one pair, being different prompts, are independent draws.
Sampled requests (``temperature`` above 0) add their draw ``k`` as the other families do
(see the module docs of :mod:`juryflow.standin.simulator`). Draws, in order: broken (``b``),
position (``P``), accuracy (``a``, and the wrong verdict when it misses); at ``a`` 1, ``P`` 0,
``b`` 0 the draws are made but none can change the answer, which is then the truth.

Order flips: ask a judge of accuracy 1, position bias ``P`` (``b`` 0) one pair in both orders
and map the swapped answer back (swapped ``A`` is the original ``B``). The order whose truth
is ``A`` is answered ``A`` whichever draw fires; an order whose truth is ``B`` or ``tie`` is
answered ``A`` (wrongly) with chance ``P``, and any such wrong answer makes the two disagree.
So the two verdicts disagree with chance exactly

    1 - (1 - P) ** m,   m = the number of the pair's two orders whose truth is not ``A``:

``P`` for a pair with a better answer (m = 1), ``P * (2 - P)`` for a tied pair (m = 2); over
pairs of which a share ``t`` are ties, ``P * (1 + t * (1 - P))``.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = [
    "PAIR_PARAMS",
    "VERDICTS",
    "Labelled",
    "SimPair",
    "Verdict",
    "better",
    "find_pair",
    "hallucinated_chars",
    "pair_reply",
    "pair_verdict",
]

Verdict = Literal["A", "B", "tie"]
VERDICTS: tuple[Verdict, ...] = ("A", "B", "tie")

PAIR_PARAMS = {"a": "accuracy", "P": "position_bias", "b": "broken"}
"""The ``sim-pair`` parameter letters and the :class:`SimPair` fields they set."""

# The form the prompt renderer gives a slot's own tag inside a value (prompts/loader.py).
_ESCAPED_TAG = re.compile(r"&lt;(/?)([A-Za-z_][\w-]*)&gt;")

_REASONS: dict[Verdict, str] = {
    "A": "The first answer stays closer to what the input supports than the second.",
    "B": "The second answer stays closer to what the input supports than the first.",
    "tie": "Both answers are equally well supported by the input.",
}


class Labelled(Protocol):
    """What the truth needs of a gold label: :class:`juryflow.standin.simulator.GoldEntry`
    (a protocol, as the simulator imports this module to dispatch the family)."""

    @property
    def spans(self) -> tuple[tuple[int, int], ...]: ...

    @property
    def hallucinated(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class SimPair:
    """A simulated pairwise judge's parameters (``sim-pair-a0.9-P0.2``)."""

    accuracy: float = 1.0
    position_bias: float = 0.0
    broken: float = 0.0


# --- the truth -----------------------------------------------------------------------------


def hallucinated_chars(entry: Labelled) -> float:
    """Characters of the response inside its gold spans (overlaps counted once); infinite for
    a response labelled hallucinated without spans, which is known bad but not how bad."""
    if entry.hallucinated and not entry.spans:
        return math.inf
    total, reached = 0, 0
    for start, end in sorted(entry.spans):
        # Count only the part past what earlier spans already covered.
        total += max(0, end - max(start, reached))
        reached = max(reached, end)
    return float(total)


def better(first: Labelled, second: Labelled) -> Verdict:
    """The true verdict for two answers shown in this order: ``A`` when the first has fewer
    hallucinated characters, ``B`` when the second has, ``tie`` when they have as many."""
    one, two = hallucinated_chars(first), hallucinated_chars(second)
    if one < two:
        return "A"
    if two < one:
        return "B"
    return "tie"


def find_pair(prompt: str, gold: Mapping[str, Labelled]) -> tuple[str, str] | None:
    """The two gold responses in ``prompt``, first-shown first; None unless exactly two. One
    response shown twice is a pair of identical answers (an A/A comparison: a tie)."""
    found = _candidates(prompt, gold)
    unescaped = _ESCAPED_TAG.sub(r"<\1\2>", prompt)
    if len(found) != 2 and unescaped != prompt:
        # A response holding the template's own tags is rendered with them escaped.
        found = _candidates(unescaped, gold)
    if len(found) != 2:
        return None
    (_, first), (_, second) = sorted(found)
    return first, second


def _candidates(text: str, gold: Mapping[str, Labelled]) -> list[tuple[int, str]]:
    """(first free position, response) of each gold response occurring in ``text`` outside
    the occurrences of longer ones (a response quoted inside another is not a candidate)."""
    present = sorted((r for r in gold if r and r in text), key=len, reverse=True)
    claimed: list[tuple[int, int]] = []
    found: list[tuple[int, str]] = []
    for response in present:
        free = [
            start
            for start in _occurrences(text, response)
            if not any(s <= start and start + len(response) <= e for s, e in claimed)
        ]
        if free:
            # Each free occurrence is a candidate: the same answer can be shown twice.
            found.extend((start, response) for start in free)
            claimed.extend((start, start + len(response)) for start in free)
    return found


def _occurrences(text: str, part: str) -> list[int]:
    starts: list[int] = []
    start = text.find(part)
    while start >= 0:
        starts.append(start)
        start = text.find(part, start + 1)
    return starts


# --- the answer ----------------------------------------------------------------------------


def pair_verdict(
    params: SimPair,
    prompt: str,
    gold: Mapping[str, Labelled] | None,
    seed: int,
    model: str,
    draw: int = 0,
) -> Verdict | None:
    """The verdict of judge ``model`` (its full name) on ``prompt``; None for a broken
    (truncated JSON) answer. ``draw`` numbers the samples of a sampled request."""
    # The digest juryflow.standin.model.answer_seed makes (not imported: it imports us).
    suffix = f"|draw{draw}" if draw else ""
    rng = random.Random(hashlib.sha256(f"{seed}|{model}|{prompt}{suffix}".encode()).digest())
    pair = find_pair(prompt, gold) if gold is not None else None
    if gold is None or pair is None:
        # Unknown responses: a seeded random verdict, never broken, as the other families'
        # random answers are.
        return rng.choice(VERDICTS)
    if rng.random() < params.broken:
        return None
    if rng.random() < params.position_bias:
        return "A"
    truth = better(gold[pair[0]], gold[pair[1]])
    if rng.random() < params.accuracy:
        return truth
    return rng.choice([v for v in VERDICTS if v != truth])


def pair_reply(verdict: Verdict) -> dict[str, str]:
    """The JSON object a pairwise judge answers with for ``verdict``."""
    return {"reasoning": _REASONS[verdict], "verdict": verdict}
