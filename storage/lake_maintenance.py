"""DuckLake upkeep: merging small files, expiring snapshots, deleting files nothing reads."""

from __future__ import annotations
