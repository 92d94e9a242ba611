from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from juryflow.maths.records import Item
from juryflow.storage.datasets import DatasetError, RowError, parse_mapping, read_items
from tests.conftest import SAMPLE


def test_bundled_sample_reads_as_items_with_gold_labels() -> None:
    rows = list(read_items(SAMPLE, ["reference", "response"]))
    items = [r for r in rows if isinstance(r, Item)]
    assert len(items) == 60 and len(rows) == 60
    first = json.loads(SAMPLE.read_text(encoding="utf-8").splitlines()[0])
    assert items[0].item_id == first["id"]
    assert items[0].variables["response"] == first["response"]
    assert items[0].gold is not None
    assert items[0].gold.hallucinated == first["hallucinated"]
    assert list(items[0].gold.spans) == [
        (label["start"], label["end"]) for label in first["labels"]
    ]
    assert sum(bool(i.gold and i.gold.hallucinated) for i in items) == 39
    assert items[0].metadata["model"] == first["model"]


def test_score_prompt_variables_fall_back_to_ragtruth_columns() -> None:
    item = next(iter(read_items(SAMPLE, ["input", "output"])))
    assert isinstance(item, Item)
    first = json.loads(SAMPLE.read_text(encoding="utf-8").splitlines()[0])
    assert item.variables == {"input": first["reference"], "output": first["response"]}


def test_map_overrides_columns(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("uid,ctx,answer\na,the sky is blue,the sky is green\n", encoding="utf-8")
    mapping = parse_mapping(["reference=ctx", "response=answer"])
    (item,) = list(read_items(path, ["reference", "response"], mapping))
    assert isinstance(item, Item)
    assert item.variables == {"reference": "the sky is blue", "response": "the sky is green"}
    assert item.item_id == "row-2"  # no id column: CSV line number (header is line 1)


def test_parquet_written_by_duckdb_is_read(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    con = duckdb.connect()
    con.execute(
        "COPY (SELECT 'x' || i AS id, 'ref ' || i AS reference, 'resp ' || i AS response, "
        "i % 2 = 0 AS hallucinated FROM range(5) t(i)) TO ? (FORMAT parquet)",
        [str(path)],
    )
    items = list(read_items(path, ["reference", "response"]))
    assert [i.item_id for i in items if isinstance(i, Item)] == [f"x{i}" for i in range(5)]
    assert items[0].gold is not None and items[0].gold.hallucinated is True


def test_missing_column_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"id": 1, "reference": "r"}) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="--map response=COLUMN"):
        list(read_items(path, ["reference", "response"]))


def test_bad_rows_become_row_errors_with_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"id": "a", "reference": "r", "response": "ok"})
    lines = [
        good.encode(),
        b"{broken",
        b'{"id": "c", "reference": "r", "response": "x\xff"}',
        b"",
        json.dumps({"id": "e", "reference": "r", "response": ""}).encode(),
        json.dumps({"id": "f", "reference": "r"}).encode(),
        json.dumps({"id": "g", "reference": "r", "response": "y" * 1_000_001}).encode(),
        json.dumps({"id": "a", "reference": "r", "response": "dup"}).encode(),
        json.dumps({"id": "h", "reference": "r", "response": "fine"}).encode(),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    rows = list(read_items(path, ["reference", "response"]))
    items = [r for r in rows if isinstance(r, Item)]
    errors = {e.row_number: e.error for e in rows if isinstance(e, RowError)}
    assert [i.item_id for i in items] == ["a", "h"]
    assert "malformed JSON" in errors[2]
    assert "invalid UTF-8" in errors[3]
    assert "is empty" in errors[5]
    assert "is missing" in errors[6]
    assert "over the 200,000 limit" in errors[7]
    assert "duplicate id" in errors[8]
    assert set(errors) == {2, 3, 5, 6, 7, 8}


def test_bad_map_option() -> None:
    with pytest.raises(DatasetError, match="VAR=COLUMN"):
        parse_mapping(["response"])


def test_unknown_format(tmp_path: Path) -> None:
    path = tmp_path / "d.xlsx"
    path.write_text("x")
    with pytest.raises(DatasetError, match="unknown dataset format"):
        list(read_items(path, ["response"]))


def test_a_real_id_equal_to_a_made_up_one_names_the_row_without_an_id(tmp_path: Path) -> None:
    """Issue 29: a row without an id becomes ``row-N``; a later row whose real id is
    ``row-N`` was refused as a plain "duplicate id", which named neither row's fix."""
    path = tmp_path / "d.jsonl"
    rows = [
        {"id": "a", "reference": "r", "response": "x"},
        {"reference": "r", "response": "y"},  # line 2: no id, becomes row-2
        {"id": "row-2", "reference": "r", "response": "z"},
        {"id": "a", "reference": "r", "response": "w"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    found = list(read_items(path, ["reference", "response"]))
    assert [r.item_id for r in found if isinstance(r, Item)] == ["a", "row-2"]
    errors = [r for r in found if isinstance(r, RowError)]
    assert [(e.row_number, e.item_id) for e in errors] == [(3, "row-2"), (4, "a")]
    assert "juryflow gave row 2, which has none; give row 2 an id" in errors[0].error
    assert errors[1].error == "duplicate id 'a'"
