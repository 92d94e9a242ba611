"""Characters flagged by sets of spans, and shared by two sets, each counted once.

The pure maths behind the store's ``span_sets`` / ``span_overlaps`` rows (no I/O): a *set*
is the spans of one judgment, of one consensus or of one item's gold labels, given as
half-open intervals tagged with the set's index. Everything is vectorised over all the sets
of a written chunk, so the write path adds array passes, not a Python loop per item.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Intervals:
    """Disjoint intervals sorted by (owner, start): ``owner[i]`` is the set interval i is in."""

    owner: Ints
    starts: Ints
    ends: Ints


def _ints(values: npt.ArrayLike) -> Ints:
    return np.asarray(values, dtype=np.int64).reshape(-1)


def disjoint(owner: npt.ArrayLike, starts: npt.ArrayLike, ends: npt.ArrayLike) -> Intervals:
    """Each set's intervals merged, so a character covered twice counts once; empty dropped.

    Within a set, in start order, an interval joins the one before when it starts at or
    before the furthest end so far; the furthest end is a running maximum over all sets at
    once, each set shifted past the one before so that no maximum leaks between them.
    """
    o, s, e = _ints(owner), _ints(starts), _ints(ends)
    keep = e > s
    o, s, e = o[keep], s[keep], e[keep]
    if not len(o):
        return Intervals(o, s, e)
    order = np.lexsort((s, o))
    o, s, e = o[order], s[order], e[order]
    low = int(s.min())
    stride = int(e.max()) - low + 1
    shifted = (e - low) + o * stride
    reach = np.maximum.accumulate(shifted)
    new = np.ones(len(o), dtype=bool)
    new[1:] = (o[1:] != o[:-1]) | ((s[1:] - low) + o[1:] * stride > reach[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(o) - 1)
    merged_owner = o[first]
    return Intervals(merged_owner, s[first], reach[last] - merged_owner * stride + low)


def set_sizes(intervals: Intervals, n_sets: int) -> Ints:
    """Characters per set (``intervals`` disjoint within each set)."""
    lengths = intervals.ends - intervals.starts
    return np.bincount(intervals.owner, weights=lengths, minlength=n_sets).astype(np.int64)


def _ranges(starts: Ints, lengths: Ints) -> Ints:
    """Concatenated ``arange(start, start + length)`` for every pair of arguments."""
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    before = np.cumsum(lengths) - lengths
    return np.repeat(starts - before, lengths) + np.arange(total, dtype=np.int64)


def overlaps(intervals: Intervals, n_sets: int, a: npt.ArrayLike, b: npt.ArrayLike) -> Ints:
    """|A ∩ B| for each pair of sets (a[k], b[k]), as |A| + |B| - |A ∪ B|."""
    pa, pb = _ints(a), _ints(b)
    counts = np.bincount(intervals.owner, minlength=n_sets).astype(np.int64)
    offsets = np.cumsum(counts) - counts
    sizes = set_sizes(intervals, n_sets)
    pair = np.arange(len(pa), dtype=np.int64)
    rows = np.concatenate([_ranges(offsets[pa], counts[pa]), _ranges(offsets[pb], counts[pb])])
    owners = np.concatenate([np.repeat(pair, counts[pa]), np.repeat(pair, counts[pb])])
    union = disjoint(owners, intervals.starts[rows], intervals.ends[rows])
    return sizes[pa] + sizes[pb] - set_sizes(union, len(pa))


def pairs_within(groups: npt.ArrayLike) -> tuple[Ints, Ints]:
    """Every pair (i, j), i < j, of positions that share a group (``groups`` sorted)."""
    g = _ints(groups)
    if not len(g):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    start = np.ones(len(g), dtype=bool)
    start[1:] = g[1:] != g[:-1]
    group_start = np.flatnonzero(start)
    group_size = np.diff(np.append(group_start, len(g)))
    size = np.repeat(group_size, group_size)
    rank = np.arange(len(g)) - np.repeat(group_start, group_size)
    partners = size - rank - 1
    first = np.repeat(np.arange(len(g), dtype=np.int64), partners)
    second = _ranges(np.arange(len(g), dtype=np.int64) + 1, partners)
    return first, second
