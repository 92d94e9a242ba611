"""Typed, streamed ingestion (issue 10): every value is text on purpose, every bad row is a
row error with its line number, anywhere in the file, in every format."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.maths.records import Item
from juryflow.storage.dataset_readers import COLUMN_SAMPLE_ROWS, iter_jsonl
from juryflow.storage.datasets import (
    DatasetError,
    RowError,
    dataset_columns,
    dataset_fingerprint,
    read_items,
)

NEEDED = ["reference", "response"]
runner = CliRunner()


def _jsonl(path: Path, rows: list[object]) -> Path:
    lines = [r if isinstance(r, bytes) else json.dumps(r).encode() for r in rows]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _split(rows: list[Item | RowError]) -> tuple[list[Item], dict[int, str]]:
    items = [r for r in rows if isinstance(r, Item)]
    errors = {r.row_number: r.error for r in rows if isinstance(r, RowError)}
    return items, errors


# -- 2. one odd value no longer retypes a column --------------------------------------------


def test_a_number_in_a_text_column_leaves_the_other_rows_plain(tmp_path: Path) -> None:
    # Attack: DuckDB typed the whole column JSON, storing '"alpha"' (quotes included) and
    # '"line one\\nline two"', which shifted every gold offset by one.
    path = _jsonl(
        tmp_path / "typed.jsonl",
        [
            {
                "id": "alpha",
                "reference": "r",
                "response": "line one\nline two",
                "labels": [{"start": 5, "end": 8}],
            },
            {"id": 12, "reference": 3.5, "response": 7},
            {"id": True, "reference": "r", "response": False},
            {"id": 123456789012345678901234567890, "reference": "r", "response": "big id"},
        ],
    )
    items, errors = _split(list(read_items(path, NEEDED)))
    assert errors == {}
    first = items[0]
    assert first.item_id == "alpha"
    assert first.variables["response"] == "line one\nline two"
    assert first.gold is not None and first.gold.spans == ((5, 8),)
    start, end = first.gold.spans[0]
    assert first.variables["response"][start:end] == "one"
    assert (items[1].item_id, items[1].variables) == ("12", {"reference": "3.5", "response": "7"})
    assert (items[2].item_id, items[2].variables["response"]) == ("true", "false")
    assert items[3].item_id == "123456789012345678901234567890"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"id": "x", "reference": "r", "response": ["a", "b"]},
            "column 'response' (variable 'response') is a list (list ['a', 'b']), not text",
        ),
        (
            {"id": "x", "reference": {"k": 1}, "response": "ok"},
            "column 'reference' (variable 'reference') is an object, not text",
        ),
        ({"id": ["x"], "reference": "r", "response": "ok"}, "column 'id' (the id) is a list"),
        ({"id": {"a": 1}, "reference": "r", "response": "ok"}, "column 'id' (the id) is an obj"),
        (
            {"id": "x", "reference": "r", "response": "half a pair \ud800"},
            "column 'response' (variable 'response') holds an unpaired surrogate (\\ud800)",
        ),
        ({"id": "\udc00", "reference": "r", "response": "ok"}, "column 'id' (the id) holds an"),
    ],
)
def test_a_list_or_object_where_text_belongs_is_a_row_error(
    tmp_path: Path, row: dict[str, object], message: str
) -> None:
    good = {"id": "g", "reference": "r", "response": "fine"}
    path = _jsonl(tmp_path / "d.jsonl", [good, row, {**good, "id": "h"}])
    items, errors = _split(list(read_items(path, NEEDED)))
    assert [i.item_id for i in items] == ["g", "h"]
    assert list(errors) == [2]
    assert message in errors[2], errors[2]


# -- 3. a bad row anywhere is a row error, not a failed run ---------------------------------


def test_bad_jsonl_lines_late_in_a_large_file_are_row_errors(tmp_path: Path) -> None:
    # Attack: DuckDB read the first ~25,000 lines, then failed the whole file on line 30,000.
    bad = {30_000: b"{broken", 60_000: b'{"id": "u", "response": "caf\xe9"}', 99_999: b"[1, 2]"}
    path = tmp_path / "big.jsonl"
    with path.open("wb") as out:
        for number in range(1, 100_001):
            line = (
                bad.get(number)
                or json.dumps(
                    {"id": f"i{number}", "reference": "r", "response": f"resp {number}"}
                ).encode()
            )
            out.write(line + b"\n")
    started = time.perf_counter()
    items, errors = _split(list(read_items(path, NEEDED)))
    assert time.perf_counter() - started < 20
    assert len(items) == 99_997
    assert sorted(errors) == [30_000, 60_000, 99_999]
    assert errors[30_000].startswith("malformed JSON")
    assert errors[60_000].startswith("invalid UTF-8 at byte 28 of the line (0xe9)")
    assert errors[99_999] == "expected a JSON object, got list"


def _csv_with(
    path: Path, n: int, bad: dict[int, bytes], header: bytes = b"id,reference,response"
) -> Path:
    with path.open("wb") as out:
        out.write(header + b"\n")
        for line in range(2, n + 2):
            out.write(bad.get(line) or f"i{line},ref {line},resp {line}".encode())
            out.write(b"\n")
    return path


def test_bad_csv_rows_late_in_a_large_file_are_row_errors(tmp_path: Path) -> None:
    path = _csv_with(
        tmp_path / "big.csv",
        100_000,
        {
            90_000: b"x1,too,many,fields",
            95_000: b'x2,"quoted"garbage,resp',
            99_000: b"x3,only two",
        },
    )
    items, errors = _split(list(read_items(path, NEEDED)))
    assert len(items) == 100_000 - 3
    assert sorted(errors) == [90_000, 95_000, 99_000]
    assert "the row has 4 fields but the header has 3" in errors[90_000]
    assert errors[95_000].startswith("malformed CSV in line 95000")
    assert "the row has 2 fields" in errors[99_000]
    assert items[-1].item_id == "i100001" and items[-1].row_number == 100_001


def test_a_latin1_byte_in_a_csv_is_a_row_error_for_that_line(tmp_path: Path) -> None:
    # Choice: a line that is not UTF-8 is refused (row error), not guessed as Latin-1, so no
    # mis-decoded text ever reaches a judge or shifts a gold offset.
    path = _csv_with(tmp_path / "latin.csv", 10, {5: b"i5,ref,caf\xe9 au lait"})
    items, errors = _split(list(read_items(path, NEEDED)))
    assert len(items) == 9
    assert list(errors) == [5]
    assert "invalid UTF-8 at byte 10 of the line (0xe9); save the file as UTF-8" in errors[5]


def test_a_latin1_header_is_one_clear_dataset_error(tmp_path: Path) -> None:
    path = _csv_with(tmp_path / "h.csv", 2, {}, header=b"id,reference,r\xe9ponse")
    with pytest.raises(DatasetError, match=r"h\.csv: header line 1: invalid UTF-8"):
        dataset_columns(path)


def test_an_unclosed_quote_is_reported_and_the_rows_before_it_kept(tmp_path: Path) -> None:
    path = _csv_with(tmp_path / "q.csv", 6, {5: b'i5,"never closed,resp'})
    items, errors = _split(list(read_items(path, NEEDED)))
    assert [i.row_number for i in items] == [2, 3, 4]
    assert list(errors) == [5]
    assert errors[5].startswith("malformed CSV in lines 5-7: unexpected end of data")


def test_csv_line_numbers_stay_exact_after_a_multi_line_field(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_bytes(b'\xef\xbb\xbfid;reference;response\na;r;"two\nlines"\nb;r;\nc;r;ok\n')
    items, errors = _split(list(read_items(path, NEEDED)))
    assert [(i.item_id, i.row_number) for i in items] == [("a", 2), ("c", 5)]
    assert items[0].variables["response"] == "two\nlines"
    assert errors == {4: "column 'response' (variable 'response') is empty"}


def test_an_over_long_line_is_skipped_without_being_held(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "long.jsonl",
        [{"response": "x" * 5000}, {"response": "short"}, b"[" * 100_000],
    )
    rows = list(iter_jsonl(path, line_limit=1000))
    assert rows[0][0] == 1 and rows[0][1] is None
    assert "longer than 1,000 bytes" in str(rows[0][2])
    assert rows[1] == (2, {"response": "short"}, None)
    assert rows[2][0] == 3 and rows[2][1] is None


def test_deeply_nested_json_is_a_row_error(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "deep.jsonl", [b'{"response": ' + b"[" * 100_000 + b"}"])
    (row,) = list(iter_jsonl(path))
    assert row[1] is None and str(row[2]).startswith("malformed JSON")


def _parquet(path: Path, table: pa.Table, **options: object) -> Path:
    pq.write_table(table, path, **options)
    return path


def test_a_truncated_parquet_file_is_one_clear_error(tmp_path: Path) -> None:
    table = pa.table({"id": ["a", "b"], "reference": ["r", "r"], "response": ["x", "y"]})
    path = _parquet(tmp_path / "cut.parquet", table)
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(DatasetError) as caught:
        list(read_items(path, NEEDED))
    message = str(caught.value)
    assert str(path) in message and "truncated or corrupt" in message
    assert "\n" not in message


def test_a_truncated_parquet_file_fails_the_cli_in_one_line(tmp_path: Path) -> None:
    table = pa.table({"id": ["a"], "reference": ["r"], "response": ["x"]})
    path = _parquet(tmp_path / "cut.parquet", table)
    path.write_bytes(path.read_bytes()[:-20])
    result = runner.invoke(app, ["run", str(path), "--db", str(tmp_path / "s.duckdb")])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "not a readable Parquet file" in result.output


def test_a_corrupt_parquet_row_group_loses_only_its_rows(tmp_path: Path) -> None:
    n = 300
    table = pa.table(
        {
            "id": [f"i{k}" for k in range(n)],
            "reference": ["r"] * n,
            "response": [f"resp {k}" for k in range(n)],
        }
    )
    path = _parquet(tmp_path / "groups.parquet", table, row_group_size=100, compression="none")
    meta = pq.ParquetFile(path).metadata
    offset = meta.row_group(1).column(2).data_page_offset
    data = bytearray(path.read_bytes())
    data[offset : offset + 24] = b"\xff" * 24  # the second group's page header
    path.write_bytes(bytes(data))
    items, errors = _split(list(read_items(path, NEEDED)))
    assert [i.row_number for i in items] == [*range(1, 101), *range(201, 301)]
    assert list(errors) == [101]
    assert errors[101].startswith("rows 101-200 (row group 2) cannot be read")


def test_timestamp_ns_columns_read_as_iso_text(tmp_path: Path) -> None:
    stamps = pa.array([1_700_000_000_123_456_789, 1_700_000_000_000_000_000], pa.timestamp("ns"))
    aware = pa.array([0, 1_000], pa.timestamp("us", tz="UTC"))
    table = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "reference": ["r", "r"],
            "response": stamps,
            "seen_at": aware,
            "score": pa.array([0.5, 1.0]),
        }
    )
    path = _parquet(tmp_path / "ts.parquet", table)
    items, errors = _split(list(read_items(path, NEEDED)))
    assert errors == {}
    assert [i.item_id for i in items] == ["1", "2"]
    assert [i.variables["response"] for i in items] == [
        "2023-11-14T22:13:20.123456789",
        "2023-11-14T22:13:20",
    ]
    assert items[0].metadata["seen_at"] == "1970-01-01T00:00:00+0000"
    assert items[1].metadata["seen_at"] == "1970-01-01T00:00:00.001000+0000"


def test_a_parquet_list_column_is_a_row_error_per_row(tmp_path: Path) -> None:
    table = pa.table({"id": ["a", "b"], "reference": ["r", "r"], "response": [["x"], ["y"]]})
    path = _parquet(tmp_path / "list.parquet", table)
    items, errors = _split(list(read_items(path, NEEDED)))
    assert items == []
    assert sorted(errors) == [1, 2]
    assert "column 'response' (variable 'response') is a list" in errors[1]


# -- 5. malformed gold labels are row errors at load ----------------------------------------

TEXT = "The cafe opens at 9 and has free WiFi."


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (7, "'labels' must be a list of {start, end} objects, got int 7"),
        ("x", "'labels' is not valid JSON"),
        ("7", "'labels' must be a list of {start, end} objects, got int 7"),
        (True, "'labels' must be a list of {start, end} objects, got bool True"),
        ([1], "label 1 must be an object with 'start' and 'end', got int 1"),
        ([[0, 3]], "label 1 must be an object with 'start' and 'end', got list [0, 3]"),
        (["{}"], "label 1 must be an object with 'start' and 'end', got str '{}'"),
        ([{"start": "a"}], "label 1 has no 'end'"),
        ([{"start": "a", "end": 3}], "label 1: start must be an integer, got str 'a'"),
        ([{"end": 3}], "label 1 has no 'start'"),
        ([{"start": 0, "end": 2.5}], "label 1: end must be an integer, got float 2.5"),
        ([{"start": 0, "end": "3.0"}], "label 1: end must be an integer, got str '3.0'"),
        ([{"start": False, "end": 3}], "label 1: start must be an integer, got bool False"),
        ([{"start": 0, "end": True}], "label 1: end must be an integer, got bool True"),
        ([{"start": [0], "end": 3}], "label 1: start must be an integer, got list [0]"),
        ([{"start": 0, "end": float("nan")}], "label 1: end must be an integer, got float nan"),
        ([{"start": 0, "end": 39}], "end 39 is past the end of the response text (38 char"),
    ],
)
def test_malformed_gold_labels_are_row_errors(tmp_path: Path, labels: object, message: str) -> None:
    good = {"id": "g", "reference": "r", "response": TEXT, "labels": [{"start": 18, "end": 19}]}
    path = _jsonl(tmp_path / "l.jsonl", [good, {**good, "id": "b", "labels": labels}])
    items, errors = _split(list(read_items(path, NEEDED)))
    assert [i.item_id for i in items] == ["g"]
    assert list(errors) == [2]
    assert errors[2].startswith("bad gold labels: ") and message in errors[2], errors[2]
    assert errors[2].endswith("fix or remove the row's 'labels'")


def test_labels_and_ids_first_seen_past_the_column_sample_are_still_read(
    tmp_path: Path,
) -> None:
    # The bench found it: JSONL columns come from the first 20,480 rows, and a 'labels'
    # column first seen at 99 % of the file was silently ignored, bad labels included.
    plain = {"reference": "r", "response": TEXT}
    late = COLUMN_SAMPLE_ROWS + 10
    rows: list[object] = [plain] * (late + 1)
    rows[late - 1] = {**plain, "id": "late", "labels": [{"start": 18, "end": 19}]}
    rows[late] = {**plain, "labels": 7}
    items, errors = _split(list(read_items(_jsonl(tmp_path / "late.jsonl", rows), NEEDED)))
    assert list(errors) == [late + 1] and "got int 7" in errors[late + 1]
    last = items[-1]
    assert last.item_id == "late" and last.gold is not None and last.gold.spans == ((18, 19),)


@pytest.mark.parametrize("flag", ["maybe", 2, [True]])
def test_a_hallucinated_flag_that_is_not_a_boolean_is_a_row_error(
    tmp_path: Path, flag: object
) -> None:
    path = _jsonl(
        tmp_path / "h.jsonl", [{"reference": "r", "response": TEXT, "hallucinated": flag}]
    )
    items, errors = _split(list(read_items(path, NEEDED)))
    assert items == [] and list(errors) == [1]
    error = errors[1]
    assert "'hallucinated' must be true or false" in error
    assert error.endswith("fix or remove the row's 'hallucinated'")


def test_hallucinated_flags_in_common_spellings_are_read(tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    path.write_text(
        "reference,response,hallucinated\nr,a,Yes\nr,b,0\nr,c,\nr,d,TRUE\n", encoding="utf-8"
    )
    items, errors = _split(list(read_items(path, NEEDED)))
    assert errors == {}
    assert [i.gold.hallucinated if i.gold else None for i in items] == [True, False, None, True]


# -- the content fingerprint --resume will check --------------------------------------------


def test_dataset_fingerprint_is_the_sha256_and_size_of_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    content = b"".join(
        json.dumps({"id": k, "response": "x" * 100}).encode() + b"\n" for k in range(30_000)
    )
    assert len(content) > 3 * 1024 * 1024  # several 1 MiB blocks
    path.write_bytes(content)
    fingerprint = dataset_fingerprint(path)
    assert fingerprint == f"sha256:{hashlib.sha256(content).hexdigest()}:{len(content)}"
    assert dataset_fingerprint(str(path)) == fingerprint
    path.write_bytes(content[:-2] + b"Z\n")  # same size, one byte changed
    assert dataset_fingerprint(path) != fingerprint
    with pytest.raises(DatasetError, match="does not exist"):
        dataset_fingerprint(tmp_path / "gone.jsonl")


# -- end to end: the run stores the row errors, lists them and resumes -----------------------


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_run_lists_late_row_errors_and_resumes(tmp_path: Path) -> None:
    from juryflow.storage.store import Store

    sample = json.loads(
        (Path(__file__).resolve().parents[1] / "examples" / "ragtruth_data2txt_sample.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()[0]
    )
    rows: list[object] = [{**sample, "id": f"s{k}"} for k in range(40)]
    rows[9] = b"{broken"
    rows[24] = {**sample, "id": 25, "response": {"not": "text"}}
    rows[38] = {**sample, "id": "s38", "labels": 7}
    rows[39] = {**sample, "id": 40}  # a number id among string ids: stored as "40"
    dataset = _jsonl(tmp_path / "mixed.jsonl", rows)
    db = tmp_path / "run.duckdb"

    result = runner.invoke(app, ["run", str(dataset), "--db", str(db), "--chunk-size", "16"])
    assert result.exit_code == 0, result.output
    assert "3 rejected rows" in result.output
    for line in ("line 10: malformed JSON", "line 25: column 'response'", "line 39: bad gold"):
        assert line in result.output, result.output
    store = Store(db)
    _, runs = store.query("SELECT run_id FROM runs")
    run_id = runs[0][0]
    _, ids = store.query("SELECT item_id FROM items WHERE item_id IN ('40', '\"40\"')")
    assert ids == [("40",)]
    _, errors = store.query("SELECT row_number FROM row_errors ORDER BY row_number")
    assert [r[0] for r in errors] == [10, 25, 39]

    resumed = runner.invoke(app, ["run", "--resume", run_id, "--db", str(db)])
    assert resumed.exit_code == 0, resumed.output
    assert "3 rejected rows" in resumed.output and "line 25:" in resumed.output
    _, counts = Store(db).query("SELECT count(*), count(DISTINCT item_id) FROM items")
    assert counts == [(37, 37)]
