"""The `evaluate-sharded` flow: one evaluation split into N shard flow runs on a work pool."""

from __future__ import annotations
