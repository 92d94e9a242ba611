"""Samples the flow found in the cache for an item whose other samples are still to call.

The flow looks the cache up (it owns the store) and leaves what it found here, by the
item's single-call cache key; the sampled judge, in the same process, takes them and calls
only the missing samples. For a ``--workers`` process the flow takes them back and sends
them with the items, and the worker leaves them here in its own process. A judge on Dask
finds none and calls every sample of such an item: more calls, the same answers' kind.
"""

from __future__ import annotations

import threading

from juryflow.maths.records import Judgment

_lock = threading.Lock()
_known: dict[str, dict[int, Judgment]] = {}


def offer(base_key: str, samples: dict[int, Judgment]) -> None:
    """Leave the cached ``samples`` (by sample index) of the answer keyed ``base_key``."""
    if samples:
        with _lock:
            _known[base_key] = dict(samples)


def take(base_key: str) -> dict[int, Judgment]:
    """The samples left for ``base_key`` (removed), or none."""
    with _lock:
        return _known.pop(base_key, {})


def forget(base_keys: list[str]) -> None:
    """Drop what was left for these keys and not taken (a chunk that ended early)."""
    with _lock:
        for key in base_keys:
            _known.pop(key, None)
