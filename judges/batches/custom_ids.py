"""The ``custom_id`` of a request: the same for the same (item, judge), whatever its text.

Anthropic allows ``^[a-zA-Z0-9_-]{1,64}$`` and item ids may hold anything, so the id is a
hash; a submitted batch keeps the mapping back (``SubmittedBatch.entries``), and a resumed
run can rebuild it from its own (item, judge) pairs since the hash is deterministic.
"""

from __future__ import annotations

import hashlib
import json

PREFIX = "jf_"
_DIGEST_CHARS = 48  # 192 bits: no two (item, judge) pairs of any run share one


def custom_id(item_id: str, judge_id: str) -> str:
    # A JSON pair, not a joined string: ("a|b", "c") and ("a", "b|c") must differ.
    pair = json.dumps([judge_id, item_id]).encode("utf-8")
    return PREFIX + hashlib.sha256(pair).hexdigest()[:_DIGEST_CHARS]
