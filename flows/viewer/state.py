"""What every page of the viewer shares: the store, the reviewer, one lock for the file."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from juryflow.storage.store import Store


@dataclass(frozen=True)
class ViewerState:
    """``reviewer`` names who adjudicates (``--reviewer`` or ``$JURYFLOW_REVIEWER``).

    ``file_lock``: DuckDB refuses a read-only and a read-write connection to one file in one
    process at the same time, and pages are served from a thread pool, so every connection
    this process opens to the store is taken under it.
    """

    store: Store
    reviewer: str
    file_lock: threading.Lock = field(default_factory=threading.Lock)
