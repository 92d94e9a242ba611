"""Where a list of requests is cut into batches: at most so many requests and bytes each."""

from __future__ import annotations

from collections.abc import Sequence

from juryflow.judges.batches.records import BatchLimits


def split(sizes: Sequence[int], limits: BatchLimits, overhead: int = 0) -> list[range]:
    """Consecutive index ranges of ``sizes``, each within ``limits`` with ``overhead`` bytes
    of envelope, in order and greedy (each batch as full as it may be).

    Every size must fit on its own (``overhead + size <= max_bytes``); callers check that
    first, since only they can say which request is too big.
    """
    chunks: list[range] = []
    start, used = 0, overhead
    for index, size in enumerate(sizes):
        if overhead + size > limits.max_bytes:
            raise ValueError(f"request {index} ({size:,} bytes) cannot fit in any batch")
        full = index - start >= limits.max_requests or used + size > limits.max_bytes
        if index > start and full:
            chunks.append(range(start, index))
            start, used = index, overhead
        used += size
    if start < len(sizes):
        chunks.append(range(start, len(sizes)))
    return chunks
