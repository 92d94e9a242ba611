"""``item_disagreement_measures``: ``item_disagreement`` without the rank, and a run filter on
it that reaches every table it reads (what lets the viewer read one run of a large store)."""

from __future__ import annotations

import re
from pathlib import Path

from juryflow.storage.store import Store
from juryflow.storage.views import DISAGREEMENT_RANK_ORDER
from tests.test_views import HAND, HAND_GOLD, build_store, rows


def two_runs(tmp_path: Path) -> Store:
    path = tmp_path / "s.duckdb"
    build_store(path, ["A", "B", "C"], HAND, HAND_GOLD, run_id="run-1")
    return build_store(path, ["A", "B", "C"], HAND[:6], HAND_GOLD, run_id="run-2")


def test_measures_are_item_disagreement_without_the_rank(tmp_path: Path) -> None:
    store = two_runs(tmp_path)
    ranked = rows(store, "SELECT * FROM item_disagreement ORDER BY run_id, item_id")
    measures = rows(
        store,
        "SELECT * FROM item_disagreement_measures ORDER BY run_id, item_id",
    )
    assert len(ranked) == len(measures) == 5
    for r, m in zip(ranked, measures, strict=True):
        assert {
            k: v for k, v in r.items() if k not in ("disagreement_rank", "consensus_chars")
        } == {k: v for k, v in m.items() if k != "row_number"}
    # the rank is the measures' order within the run
    ordered = rows(
        store,
        "SELECT run_id, item_id, row_number() OVER (PARTITION BY run_id "
        f"ORDER BY {DISAGREEMENT_RANK_ORDER}) AS rank FROM item_disagreement_measures",
    )
    assert {(o["run_id"], o["item_id"]): o["rank"] for o in ordered} == {
        (r["run_id"], r["item_id"]): r["disagreement_rank"] for r in ranked
    }


def test_a_run_filter_reaches_every_table_scan(tmp_path: Path) -> None:
    store = two_runs(tmp_path)
    with store.read() as con:
        plan = str(
            con.execute(
                "EXPLAIN SELECT * FROM item_disagreement_measures WHERE run_id = 'run-2'"
            ).fetchall()[0][1]
        )
    scans = plan.count("SEQ_SCAN")
    assert scans >= 3  # items, judgments, consensus
    assert len(re.findall(r"run_id\s*=\s*'run-2'", plan)) >= scans, plan
