"""The ``custom_id`` of a request: the same for the same (item, judge, sample), whatever its
text (a judge asked once, or a sampled judge's sample 0, has the id of its (item, judge)).

Anthropic allows ``^[a-zA-Z0-9_-]{1,64}$`` and item ids may hold anything, so the id is a
hash; a submitted batch keeps the mapping back (``SubmittedBatch.entries``), and a resumed
run can rebuild it from its own (item, judge, sample) requests since the hash is
deterministic.
"""

from __future__ import annotations

import hashlib
import json

PREFIX = "jf_"
_DIGEST_CHARS = 48  # 192 bits: no two (item, judge) pairs of any run share one


def custom_id(item_id: str, judge_id: str, sample: int = 0) -> str:
    # A JSON list, not a joined string: ("a|b", "c") and ("a", "b|c") must differ.
    parts: list[object] = [judge_id, item_id] if sample == 0 else [judge_id, item_id, sample]
    return PREFIX + hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()[:_DIGEST_CHARS]
