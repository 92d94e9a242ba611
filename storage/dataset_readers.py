"""Stream a dataset file's rows, one (line number, row or None, error or None) at a time.

JSONL and CSV are read line by line in Python, so every row keeps its exact line number and
a bad line (broken JSON, invalid UTF-8, a wrong field count, an unclosed quote, an
over-long line) becomes an error for that line while the rest goes on. Parquet is read a
record batch at a time with pyarrow; an unreadable row group becomes one error naming its
rows. Memory is bounded by a batch, a line (``line_limit``), a CSV field (``field_limit``)
and the columns (``MAX_COLUMNS``), never by the file.

Values keep the types the file gives them (JSON numbers, booleans, lists...; CSV text;
Parquet types with timestamps, dates and times as ISO text): turning them into prompt text
is the caller's job, so that a list where text belongs is reported rather than stringified.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from juryflow.judges.untrusted.loading import load_json

RawRow = tuple[int, dict[str, Any] | None, str | None]
"""Line number (Parquet: row ordinal), the row (None when unreadable) and the error."""

DEFAULT_LINE_LIMIT = 64 * 1024 * 1024
"""Longest line read, in bytes: longer lines are skipped as errors without being held."""

DEFAULT_FIELD_LIMIT = 16 * 1024 * 1024
"""Longest CSV field, in characters (an unclosed quote otherwise reads to the end)."""

COLUMN_SAMPLE_ROWS = 20_480
"""JSONL rows whose keys name the dataset's columns (DuckDB's default sample, too)."""

MAX_COLUMNS = 4_096
"""Most columns a dataset may have: a CSV header's names, a Parquet schema's, the keys of a
JSONL file's first rows together and of any one row. A dataset feeds a few prompt
variables, an id, labels and some metadata; a file of tens of thousands of columns is a
matrix or a table on its side, and each of its rows would carry them all as metadata. Past
it the file is refused in one line naming the count (a JSONL row past the sampled ones:
that row)."""

_UTF8_BOM = b"\xef\xbb\xbf"
_CSV_DELIMITERS = (",", ";", "\t", "|")
_DRAIN = 1024 * 1024


class DatasetError(ValueError):
    """The dataset as a whole cannot be read (unknown format, missing file or column)."""


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


def _open(path: Path) -> IO[bytes]:
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise DatasetError(f"dataset {path} does not exist") from None
    except OSError as error:
        raise DatasetError(f"dataset {path} cannot be opened: {error.strerror}") from None


def _lines(handle: IO[bytes], limit: int) -> Iterator[tuple[int, bytes | None]]:
    """Every physical line (split on LF only) with its number; None for one over ``limit``.

    An over-long line is drained in bounded blocks, so one runaway line cannot take the
    memory a whole-line read would.
    """
    number = 0
    while True:
        raw = handle.readline(limit + 1)
        if not raw:
            return
        number += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            while (rest := handle.readline(_DRAIN)) and not rest.endswith(b"\n"):
                pass
            yield number, None
            continue
        if number == 1 and raw.startswith(_UTF8_BOM):
            raw = raw[len(_UTF8_BOM) :]
        yield number, raw


def _too_long(limit: int) -> str:
    return (
        f"the line is longer than {limit:,} bytes; split the row or shorten its values "
        "(values over --max-chars are refused anyway)"
    )


def _bad_utf8(error: UnicodeDecodeError) -> str:
    return (
        f"invalid UTF-8 at byte {error.start} of the line (0x{error.object[error.start]:02x}); "
        "save the file as UTF-8"
    )


def _json_object(raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return None, _bad_utf8(error)
    # The standard json module (through the nesting check), not orjson: orjson turns
    # integers past 64 bits into floats, silently changing ids like 1234567890123456789012.
    try:
        value = load_json(text)
    except json.JSONDecodeError as error:
        return None, f"malformed JSON: {error.msg} at column {error.colno}"
    except ValueError as error:  # nested too deeply; an integer literal of 4,300+ digits
        return None, f"malformed JSON: {error}"
    if not isinstance(value, dict):
        return None, f"expected a JSON object, got {type(value).__name__}"
    return value, None


def iter_jsonl(
    path: Path, line_limit: int = DEFAULT_LINE_LIMIT, max_keys: int | None = MAX_COLUMNS
) -> Iterator[RawRow]:
    """Every non-blank line of a JSONL file, parsed; a row of more than ``max_keys`` keys
    (None: any number) is an error."""
    with _open(path) as handle:
        for number, raw in _lines(handle, line_limit):
            if raw is None:
                yield number, None, _too_long(line_limit)
                continue
            if not raw.strip():
                continue
            row, error = _json_object(raw)
            if row is not None and max_keys is not None and len(row) > max_keys:
                error = (
                    f"the row has {len(row):,} keys, over the limit of {max_keys:,} columns; "
                    "keep only the columns the run needs"
                )
                row = None
            yield number, row, error


def _too_wide(path: Path, count: int, what: str = "columns") -> str:
    return (
        f"{path}: {count:,} {what}, over the limit of {MAX_COLUMNS:,} columns; keep the "
        "columns the run needs (prompt variables, id, labels, metadata) in a file of their own"
    )


def _jsonl_columns(path: Path) -> list[str]:
    columns: dict[str, None] = {}
    seen = 0
    for _, row, _ in iter_jsonl(path, max_keys=None):
        if row is not None:
            columns.update(dict.fromkeys(row))
            seen += 1
            if len(columns) > MAX_COLUMNS:
                what = "columns" if seen == 1 else f"columns (the keys of its first {seen:,} rows)"
                raise DatasetError(_too_wide(path, len(columns), what))
            if seen >= COLUMN_SAMPLE_ROWS:
                break
    return list(columns)


# -- CSV ---------------------------------------------------------------------------------


def _delimiter(path: Path, header: str) -> str:
    if path.suffix.lower() == ".tsv":
        return "\t"
    # The header names the columns, so the separator that splits it most is the file's.
    counts = {d: header.count(d) for d in _CSV_DELIMITERS}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


class _DecodedLines:
    """Physical lines as text for ``csv.reader``, noting which were not valid UTF-8 or too
    long; an undecodable line is passed on with replacement characters and its record is
    then reported, not used."""

    def __init__(self, lines: Iterator[tuple[int, bytes | None]], line_limit: int) -> None:
        self._lines = lines
        self._line_limit = line_limit
        self.bad: dict[int, str] = {}

    def __iter__(self) -> Iterator[str]:
        for number, raw in self._lines:
            if raw is None:
                self.bad[number] = _too_long(self._line_limit)
                yield "\n"
                continue
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as error:
                self.bad[number] = f"line {number}: {_bad_utf8(error)}"
                yield raw.decode("utf-8", "replace")

    def take_errors(self, last_line: int) -> list[str]:
        found = [self.bad.pop(n) for n in sorted(n for n in self.bad if n <= last_line)]
        return found


def _csv_records(
    path: Path, line_limit: int, field_limit: int
) -> Iterator[tuple[int, int, list[str] | None, str | None]]:
    """(first line, last line, fields or None, error or None) for every non-blank record."""
    # The field limit is process-wide state; it only ever grows, so no other reader of
    # CSV in this process gets a smaller one than it had.
    csv.field_size_limit(max(csv.field_size_limit(), field_limit))
    with _open(path) as handle:
        lines = _DecodedLines(_lines(handle, line_limit), line_limit)
        text = iter(lines)
        header_line = next(text, None)
        if header_line is None:
            raise DatasetError(f"{path}: the CSV file is empty; it needs a header line")
        if lines.bad:
            raise DatasetError(f"{path}: header {lines.bad[1]}")
        delimiter = _delimiter(path, header_line)

        def with_header() -> Iterator[str]:
            yield header_line
            yield from text

        reader = csv.reader(with_header(), delimiter=delimiter, strict=True)
        while True:
            first = reader.line_num + 1
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                last = reader.line_num
                lines.take_errors(last)
                where = f"line {first}" if last <= first else f"lines {first}-{last}"
                yield (
                    first,
                    last,
                    None,
                    (
                        f"malformed CSV in {where}: {error}; check the quoting (an unclosed quote "
                        "runs on over the lines after it)"
                    ),
                )
                continue
            last = reader.line_num
            if lines.bad:
                errors = lines.take_errors(last)
                if errors:
                    yield first, last, None, "; ".join(errors)
                    continue
            if fields:
                yield first, last, fields, None


def check_header(path: Path, fields: list[str], limit: int | None = MAX_COLUMNS) -> list[str]:
    """``fields`` as the column names of ``path``, in linear time; DatasetError for more
    than ``limit`` (None: no limit) or for a name given twice."""
    if limit is not None and len(fields) > limit:
        raise DatasetError(_too_wide(path, len(fields)))
    repeated = sorted(name for name, count in Counter(fields).items() if count > 1)
    if repeated:
        raise DatasetError(
            f"{path}: column {repeated[0]!r} appears more than once in the header; rename it"
        )
    return fields


def _csv_header(path: Path, fields: list[str] | None, error: str | None) -> list[str]:
    if fields is None:
        raise DatasetError(f"{path}: the header line cannot be read: {error}")
    return check_header(path, fields)


def iter_csv(
    path: Path, line_limit: int = DEFAULT_LINE_LIMIT, field_limit: int = DEFAULT_FIELD_LIMIT
) -> Iterator[RawRow]:
    """Every data record of a CSV file as {header: text}, numbered by its first line."""
    records = _csv_records(path, line_limit, field_limit)
    first = next(records, None)
    if first is None:
        raise DatasetError(f"{path}: the CSV file is empty; it needs a header line")
    header = _csv_header(path, first[2], first[3])
    for number, _, fields, error in records:
        if fields is None:
            yield number, None, error
        elif len(fields) != len(header):
            yield (
                number,
                None,
                (
                    f"the row has {len(fields)} fields but the header has {len(header)}; quote "
                    "values that contain the separator"
                ),
            )
        else:
            yield number, dict(zip(header, fields, strict=True)), None


def _csv_columns(path: Path) -> list[str]:
    first = next(_csv_records(path, DEFAULT_LINE_LIMIT, DEFAULT_FIELD_LIMIT), None)
    if first is None:
        raise DatasetError(f"{path}: the CSV file is empty; it needs a header line")
    return _csv_header(path, first[2], first[3])


# -- Parquet -----------------------------------------------------------------------------


def _parquet_file(path: Path) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except FileNotFoundError:
        raise DatasetError(f"dataset {path} does not exist") from None
    except (pa.ArrowException, OSError) as error:
        raise DatasetError(
            f"{path}: not a readable Parquet file ({error}); it may be truncated or "
            "corrupt: write it again"
        ) from None


def _as_text(column: pa.Array) -> pa.Array:
    """Temporal columns as ISO text: Python datetimes cannot hold nanoseconds, nor years
    past 9999, so converting them row by row would fail on valid files."""
    kind = column.type
    if pa.types.is_timestamp(kind):
        suffix = "%z" if kind.tz else ""
        text = pc.strftime(column, format=f"%Y-%m-%dT%H:%M:%S{suffix}")
        # %S carries the unit's fraction (".000000000"): drop it when it is all zeros.
        return pc.replace_substring_regex(text, pattern=r"\.0+($|[+-])", replacement=r"\1")
    if pa.types.is_date(kind) or pa.types.is_time(kind) or pa.types.is_duration(kind):
        return pc.cast(column, pa.string())
    return column


def _batch_rows(batch: pa.RecordBatch) -> list[dict[str, Any] | str]:
    """The batch's rows as dicts; a row Arrow cannot convert is its error message instead."""
    try:
        columns = [_as_text(column) for column in batch.columns]
        converted = pa.RecordBatch.from_arrays(columns, names=batch.schema.names)
    except (pa.ArrowException, ValueError) as error:
        return [f"a column cannot be read as text: {error}"] * batch.num_rows
    try:
        return list(converted.to_pylist())
    except (pa.ArrowException, ValueError, OverflowError):
        pass
    # Only a failing batch pays for row-by-row conversion, to find the rows at fault.
    rows: list[dict[str, Any] | str] = []
    for index in range(converted.num_rows):
        try:
            rows.extend(converted.slice(index, 1).to_pylist())
        except (pa.ArrowException, ValueError, OverflowError) as error:
            rows.append(f"the row cannot be read: {error}")
    return rows


def _parquet_columns(path: Path, parquet: pq.ParquetFile) -> list[str]:
    names = list(parquet.schema_arrow.names)
    if len(names) > MAX_COLUMNS:
        raise DatasetError(_too_wide(path, len(names)))
    return names


def iter_parquet(path: Path, batch_rows: int = 2048) -> Iterator[RawRow]:
    """Every row of a Parquet file, numbered from 1, a record batch at a time."""
    parquet = _parquet_file(path)
    _parquet_columns(path, parquet)
    number = 1
    for group in range(parquet.num_row_groups):
        size = parquet.metadata.row_group(group).num_rows
        start = number
        try:
            for batch in parquet.iter_batches(batch_size=batch_rows, row_groups=[group]):
                for row in _batch_rows(batch):
                    if isinstance(row, str):
                        yield number, None, row
                    else:
                        yield number, row, None
                    number += 1
        except (pa.ArrowException, OSError) as error:
            # A corrupt page loses its row group, not the file: report it and go on.
            yield (
                number,
                None,
                (
                    f"rows {number:,}-{start + size - 1:,} (row group {group + 1}) cannot be read: "
                    f"{error}; write the file again"
                ),
            )
        number = start + size


def iter_raw_rows(
    path: Path,
    batch_rows: int = 2048,
    line_limit: int = DEFAULT_LINE_LIMIT,
    field_limit: int = DEFAULT_FIELD_LIMIT,
) -> Iterator[RawRow]:
    fmt = dataset_format(path)
    if fmt == "jsonl":
        return iter_jsonl(path, line_limit)
    if fmt == "csv":
        return iter_csv(path, line_limit, field_limit)
    return iter_parquet(path, batch_rows)


def columns_of(path: Path) -> list[str]:
    """The dataset's column names (JSONL: the keys of its first rows)."""
    if not path.is_file():
        raise DatasetError(f"dataset {path} does not exist")
    fmt = dataset_format(path)
    if fmt == "jsonl":
        return _jsonl_columns(path)
    if fmt == "csv":
        return _csv_columns(path)
    return _parquet_columns(path, _parquet_file(path))


def approximate_rows(path: Path) -> int | None:
    """Rows for a progress bar: Parquet's exact count, else the lines (a blank line or a
    multi-line CSV field counts one too many). None when the file cannot be read."""
    try:
        fmt = dataset_format(path)
        if fmt == "parquet":
            return int(_parquet_file(path).metadata.num_rows)
        lines = 0
        last = b"\n"
        with path.open("rb") as handle:
            while block := handle.read(_DRAIN):
                lines += block.count(b"\n")
                last = block[-1:]
        lines += last != b"\n"
        return max(lines - (fmt == "csv"), 0)
    except (DatasetError, OSError):
        return None
