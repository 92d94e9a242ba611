"""Read dataset rows (JSONL, CSV, Parquet) through DuckDB and turn them into items.

Rows stream in record batches so a large dataset never sits in memory whole. A row that
cannot become an item (broken JSON, invalid UTF-8, a missing or empty column, an oversized
value, gold labels that do not fit the judged text) becomes a :class:`RowError` with its
line number; the other rows go on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from judges.records import GoldLabels, Item
from storage.connection import duckdb_config

DEFAULT_MAX_CHARS = 200_000
"""Longest variable value accepted; longer ones are rejected rather than sent to a model."""

FALLBACK_COLUMNS: dict[str, tuple[str, ...]] = {
    # RAGTruth rows have no input/output columns: the score prompt judges the response
    # (output) against what the generator saw (input).
    "input": ("input", "reference"),
    "output": ("output", "response"),
}

_METADATA_SKIP = {"labels", "hallucinated", "source_info", "id"}

SPAN_TEXT_VARIABLES = ("response", "output")
"""Where gold spans point, first present wins: the response (the score prompt's ``output``
falls back to the same column)."""

_INTEGER_RE = re.compile(r"[+-]?\d+")
_SHOWN = 60
"""How much of an offending value an error message quotes."""


class DatasetError(ValueError):
    """The dataset as a whole cannot be read (unknown format, missing file or column)."""


class GoldLabelError(ValueError):
    """A row's gold labels cannot be used; the message names the label and what is wrong."""


@dataclass(frozen=True, slots=True)
class RowError:
    row_number: int
    """1-based line number for JSONL and CSV (header is line 1), row ordinal for Parquet."""
    item_id: str | None
    error: str


@dataclass(frozen=True, slots=True)
class ColumnMap:
    """Which dataset column feeds each prompt variable."""

    variables: dict[str, str]
    id_column: str | None
    labels_column: str | None
    hallucinated_column: str | None


def dataset_format(path: Path) -> str:
    suffixes = "".join(path.suffixes[-2:]).lower()
    for fmt, endings in {
        "jsonl": (".jsonl", ".ndjson", ".json"),
        "csv": (".csv", ".tsv"),
        "parquet": (".parquet", ".pq"),
    }.items():
        if any(suffixes.endswith(e) for e in endings):
            return fmt
    raise DatasetError(f"{path}: unknown dataset format; use .jsonl, .csv or .parquet")


def parse_mapping(pairs: Sequence[str]) -> dict[str, str]:
    """``["var=column", ...]`` from ``--map`` options."""
    mapping: dict[str, str] = {}
    for pair in pairs:
        var, sep, column = pair.partition("=")
        if not sep or not var.strip() or not column.strip():
            raise DatasetError(f"--map {pair!r}: expected VAR=COLUMN, e.g. --map response=answer")
        mapping[var.strip()] = column.strip()
    return mapping


def resolve_columns(
    columns: Sequence[str], needed: Sequence[str], overrides: Mapping[str, str]
) -> ColumnMap:
    available = set(columns)
    variables: dict[str, str] = {}
    for var in needed:
        if var in overrides:
            column = overrides[var]
            if column not in available:
                raise DatasetError(
                    f"--map {var}={column}: the dataset has no column {column!r}; "
                    f"columns are: {', '.join(columns)}"
                )
            variables[var] = column
            continue
        candidates = FALLBACK_COLUMNS.get(var, (var,))
        found = next((c for c in candidates if c in available), None)
        if found is None:
            raise DatasetError(
                f"the panel's prompts need variable {var!r} but the dataset has no column "
                f"{' or '.join(repr(c) for c in candidates)}; map one with --map {var}=COLUMN "
                f"(columns are: {', '.join(columns)})"
            )
        variables[var] = found
    return ColumnMap(
        variables=variables,
        id_column="id" if "id" in available else None,
        labels_column="labels" if "labels" in available else None,
        hallucinated_column="hallucinated" if "hallucinated" in available else None,
    )


def _relation_sql(fmt: str) -> str:
    return {
        "jsonl": "SELECT * FROM read_json(?, format = 'newline_delimited')",
        "csv": "SELECT * FROM read_csv(?, header = true, all_varchar = true)",
        "parquet": "SELECT * FROM read_parquet(?)",
    }[fmt]


def dataset_columns(path: Path) -> list[str]:
    if not path.is_file():
        raise DatasetError(f"dataset {path} does not exist")
    fmt = dataset_format(path)
    con = duckdb.connect()
    try:
        cursor = con.execute(f"DESCRIBE {_relation_sql(fmt)}", [str(path)])
        return [row[0] for row in cursor.fetchall()]
    except duckdb.InvalidInputException:
        if fmt != "jsonl":
            raise
        return _columns_by_lines(path)
    except duckdb.Error as error:
        raise DatasetError(f"{path}: DuckDB cannot read it as {fmt}: {error}") from None
    finally:
        con.close()


def _columns_by_lines(path: Path) -> list[str]:
    columns: dict[str, None] = {}
    for _, row, _ in _jsonl_lines(path):
        if row is not None:
            columns.update(dict.fromkeys(row))
    return list(columns)


def _jsonl_lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """Line number, parsed object (or None) and error (or None) for every non-blank line."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                yield number, None, f"invalid UTF-8 at byte {error.start} of the line"
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as error:
                yield number, None, f"malformed JSON: {error.msg} at column {error.colno}"
                continue
            if not isinstance(value, dict):
                yield number, None, f"expected a JSON object, got {type(value).__name__}"
                continue
            yield number, value, None


def _duckdb_rows(path: Path, fmt: str, batch_rows: int) -> Iterator[tuple[int, dict[str, Any]]]:
    # One thread and a bounded buffer pool: rows are consumed a batch at a time, so more
    # read-ahead only costs memory.
    con = duckdb.connect(config={**duckdb_config(), "threads": "1"})
    try:
        reader = con.execute(_relation_sql(fmt), [str(path)]).to_arrow_reader(batch_rows)
        # CSV counts its header as line 1, so data rows start at 2.
        number = 2 if fmt == "csv" else 1
        for batch in reader:
            for row in batch.to_pylist():
                yield number, row
                number += 1
    finally:
        con.close()


def iter_rows(
    path: Path, batch_rows: int = 2048
) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """Every row as (row number, row or None, error or None)."""
    fmt = dataset_format(path)
    try:
        # DuckDB reads whole well-formed files fastest; it stops at the first bad line,
        # in which case the line-by-line reader says exactly which lines are bad.
        for number, row in _duckdb_rows(path, fmt, batch_rows):
            yield number, row, None
        return
    except duckdb.InvalidInputException:
        if fmt != "jsonl":
            raise
    except duckdb.Error as error:
        raise DatasetError(f"{path}: DuckDB cannot read it as {fmt}: {error}") from None
    yield from _jsonl_lines(path)


def count_rows(path: Path) -> int | None:
    """Rows in the dataset, for progress bars; None when DuckDB cannot count them cheaply."""
    con = duckdb.connect()
    try:
        row = con.execute(
            f"SELECT count(*) FROM ({_relation_sql(dataset_format(path))})", [str(path)]
        )
        found = row.fetchone()
        return int(found[0]) if found else None
    except duckdb.Error:
        return None
    finally:
        con.close()


@dataclass(frozen=True, slots=True)
class _SpanBound:
    """The text gold spans point into, as far as checking them needs: its name and length."""

    name: str
    length: int


def _shown(value: object) -> str:
    """ "int 7", "str 'one'": the type and (shortened) value, for error messages."""
    if isinstance(value, dict):
        return "object"
    text = repr(value)
    text = text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
    return f"{type(value).__name__} {text}"


def _decoded(value: object) -> object:
    """``value``, or what it decodes to when it is JSON text.

    DuckDB infers one type per column over the whole file, so one odd row retypes the good
    ones too: a field typed JSON arrives as JSON text ('12', '"12"', '{"start": 1}'), a
    VARCHAR one as is.
    """
    if not isinstance(value, str):
        return value
    try:
        decoded: object = json.loads(value)
    except json.JSONDecodeError:
        return value
    return decoded


def _offset(value: object, label: int, field: str) -> int:
    """A label's start or end as an int; raises GoldLabelError naming what it is instead."""
    value = _decoded(value)
    if isinstance(value, str) and _INTEGER_RE.fullmatch(value.strip()):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    # DuckDB may widen an offset column to DOUBLE or DECIMAL: a whole number is still fine.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)
    raise GoldLabelError(f"label {label}: {field} must be an integer, got {_shown(value)}")


def _label_list(raw: object) -> list[object] | None:
    """The row's labels as a list (None when the row has none); raises GoldLabelError."""
    if isinstance(raw, str):
        if not raw.strip():
            return []
        try:
            raw = json.loads(raw)  # a CSV cell, or a column DuckDB typed JSON
        except json.JSONDecodeError as error:
            raise GoldLabelError(
                f"'labels' is not valid JSON ({error.msg} at column {error.colno})"
            ) from None
    if raw is None or isinstance(raw, list):
        return raw
    raise GoldLabelError(f"'labels' must be a list of {{start, end}} objects, got {_shown(raw)}")


def _gold_spans(labels: list[object], bound: _SpanBound) -> tuple[tuple[int, int], ...]:
    """Each label's (start, end), checked against the judged text; raises GoldLabelError.

    A label's ``text``, when present, is not compared with the text at its offsets: the
    offsets are what every view and statistic uses, and the text is a human's note.
    """
    spans: list[tuple[int, int]] = []
    for number, raw in enumerate(labels, start=1):
        label = _decoded(raw)
        if not isinstance(label, dict):
            raise GoldLabelError(
                f"label {number} must be an object with 'start' and 'end', got {_shown(label)}"
            )
        for field in ("start", "end"):
            if label.get(field) is None:
                raise GoldLabelError(f"label {number} has no {field!r}")
        start = _offset(label["start"], number, "start")
        end = _offset(label["end"], number, "end")
        if start < 0:
            raise GoldLabelError(f"label {number}: start {start} is negative")
        if start >= end:
            raise GoldLabelError(f"label {number}: start {start} is not before end {end}")
        if end > bound.length:
            raise GoldLabelError(
                f"label {number}: end {end} is past the end of {bound.name} "
                f"({bound.length:,} characters)"
            )
        spans.append((start, end))
    return tuple(spans)


def _gold(row: Mapping[str, Any], columns: ColumnMap, bound: _SpanBound) -> GoldLabels | None:
    raw = row.get(columns.labels_column) if columns.labels_column else None
    labels = _label_list(raw)
    spans = _gold_spans(labels, bound) if labels else ()
    hallucinated = row.get(columns.hallucinated_column) if columns.hallucinated_column else None
    if isinstance(hallucinated, str):
        hallucinated = hallucinated.strip().lower() in {"true", "1", "yes"}
    if hallucinated is None and labels is not None:
        hallucinated = bool(spans)
    if hallucinated is None and not spans:
        return None
    return GoldLabels(hallucinated=bool(hallucinated), spans=spans)


def _span_bound(variables: Mapping[str, str], columns: ColumnMap, max_chars: int) -> _SpanBound:
    """What gold spans must fit in: the judged response, or (when the prompts do not use
    it) the longest text a row may carry, so that no label can claim unbounded memory."""
    for variable in SPAN_TEXT_VARIABLES:
        if variable in variables:
            column = columns.variables[variable]
            return _SpanBound(f"the {column} text", len(variables[variable]))
    return _SpanBound("the longest accepted text (--max-chars)", max_chars)


def row_to_item(
    number: int, row: Mapping[str, Any], columns: ColumnMap, max_chars: int
) -> Item | RowError:
    raw_id = row.get(columns.id_column) if columns.id_column else None
    item_id = str(raw_id) if raw_id not in (None, "") else f"row-{number}"
    variables: dict[str, str] = {}
    for var, column in columns.variables.items():
        value = row.get(column)
        if value is None:
            return RowError(number, item_id, f"column {column!r} (variable {var!r}) is missing")
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        if not text.strip():
            return RowError(number, item_id, f"column {column!r} (variable {var!r}) is empty")
        if len(text) > max_chars:
            return RowError(
                number,
                item_id,
                f"column {column!r} has {len(text):,} characters, over the {max_chars:,} "
                "limit (raise it with --max-chars)",
            )
        variables[var] = text
    try:
        gold = _gold(row, columns, _span_bound(variables, columns, max_chars))
    except GoldLabelError as error:
        return RowError(
            number, item_id, f"bad gold labels: {error}; fix or remove the row's 'labels'"
        )
    used = set(columns.variables.values()) | _METADATA_SKIP
    metadata = {
        key: str(value)
        for key, value in row.items()
        if key not in used and isinstance(value, str | int | float | bool)
    }
    return Item(item_id, variables, gold, number, metadata)


def read_items(
    path: str | Path,
    needed: Sequence[str],
    overrides: Mapping[str, str] | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> Iterator[Item | RowError]:
    """Items of the dataset in file order; duplicate ids are row errors."""
    file = Path(path)
    columns = resolve_columns(dataset_columns(file), needed, overrides or {})
    seen: set[str] = set()
    for number, row, error in iter_rows(file):
        if row is None:
            yield RowError(number, None, error or "unreadable row")
            continue
        result = row_to_item(number, row, columns, max_chars)
        if isinstance(result, Item):
            if result.item_id in seen:
                yield RowError(number, result.item_id, f"duplicate id {result.item_id!r}")
                continue
            seen.add(result.item_id)
        yield result
