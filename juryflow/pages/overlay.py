"""One copy of a text with several span layers over it (judges, consensus, gold, annotation).

The text is cut at every layer's span boundaries; each segment lists the layers covering
it, so a page shows one copy of the text and toggles layers with CSS classes alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Layer:
    """``key`` is a CSS-safe identifier (``j0``, ``consensus``, ``gold``); ``label`` is shown."""

    key: str
    label: str
    spans: Sequence[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Segment:
    start: int
    end: int
    text: str
    layers: tuple[str, ...]


def segments(text: str, layers: Sequence[Layer]) -> list[Segment]:
    """``text`` cut at every span boundary (spans clipped to the text, empty ones dropped).

    >>> [(s.text, s.layers) for s in segments("abcdef", [Layer("a", "A", [(1, 3)]),
    ...                                                  Layer("b", "B", [(2, 5)])])]
    [('a', ()), ('b', ('a',)), ('c', ('a', 'b')), ('de', ('b',)), ('f', ())]
    """
    n = len(text)
    clipped = [[(max(0, min(s, n)), max(0, min(e, n))) for s, e in layer.spans] for layer in layers]
    cuts = {0, n}
    for spans in clipped:
        for s, e in spans:
            if s < e:
                cuts.update((s, e))
    bounds = np.array(sorted(cuts), dtype=np.int64)
    if len(bounds) < 2:
        return []
    starts, ends = bounds[:-1], bounds[1:]
    covered = np.zeros((len(layers), len(starts)), dtype=bool)
    for k, spans in enumerate(clipped):
        for s, e in spans:
            if s < e:
                covered[k] |= (starts >= s) & (ends <= e)
    keys = [layer.key for layer in layers]
    return [
        Segment(
            int(a),
            int(b),
            text[a:b],
            tuple(keys[k] for k in np.flatnonzero(covered[:, i])),
        )
        for i, (a, b) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True))
    ]


JUDGE_COLOURS: tuple[str, ...] = (
    "#0072b2",
    "#e69f00",
    "#009e73",
    "#cc79a7",
    "#d55e00",
    "#56b4e9",
    "#000000",
    "#a08c00",
    "#0072b2",
    "#e69f00",
    "#009e73",
    "#cc79a7",
)
"""The underline colour of judge layers ``j0`` .. ``j11`` (as ``_overlay.css`` has them):
the Okabe–Ito palette, told apart by colour-blind readers too (its yellow darkened to show
on white). ``j8`` .. ``j11`` reuse the first four colours, dotted instead of solid (``j4`` ..
``j7`` are dashed), and a judge's underline keeps one depth below the text (``k % 4``), so
overlapping judges stack instead of hiding one another."""

JUDGE_LINE_STYLES: tuple[str, ...] = ("solid",) * 4 + ("dashed",) * 4 + ("dotted",) * 4
