"""What every page of the viewer shares: the store, the reviewer, one lock for the file."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from juryflow.storage.store import Store


@dataclass(frozen=True)
class ViewerState:
    """``reviewer`` names who adjudicates (``--reviewer`` or ``$JURYFLOW_REVIEWER``).

    ``file_lock``: DuckDB refuses a read-only and a read-write connection to one file in one
    process at the same time, and pages are served from a thread pool, so every connection
    this process opens to the store is taken under it.

    ``allowed_hosts``: the ``Host`` names (without port) requests may carry; None accepts
    any. Bound to a loopback address, `juryflow view` allows only loopback names, so that a
    web page whose own domain was pointed at 127.0.0.1 (DNS rebinding) cannot read the store.
    """

    store: Store
    reviewer: str
    file_lock: threading.Lock = field(default_factory=threading.Lock)
    allowed_hosts: frozenset[str] | None = None

    @contextmanager
    def exclusive(self) -> Iterator[Store]:
        """The store, for the length of the block, with no other request touching the file."""
        with self.file_lock:
            yield self.store
