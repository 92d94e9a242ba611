"""Turn dataset rows (JSONL, CSV, Parquet) into items, streamed.

:mod:`juryflow.storage.dataset_readers` streams the file's rows with their line numbers. Here every
prompt variable and the id are made **text** explicitly: strings as they are, numbers and
booleans in their JSON text form (``7``, ``0.5``, ``true``), dates and times in ISO form; a
list or an object where text belongs is a row error naming the column, never a stringified
value. A row that cannot become an item (broken JSON, invalid UTF-8, a missing or empty
column, an oversized value, gold labels that do not fit the judged text) becomes a
:class:`RowError` with its line number; the other rows go on.
"""

from __future__ import annotations

import codecs
import functools
import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from juryflow.judges.untrusted.loading import load_json
from juryflow.maths.names import closest, did_you_mean
from juryflow.maths.records import GoldLabels, Item
from juryflow.storage.dataset_readers import (
    DEFAULT_FIELD_LIMIT,
    DEFAULT_LINE_LIMIT,
    DatasetError,
    RawRow,
    approximate_rows,
    columns_of,
    dataset_format,
    iter_raw_rows,
)

__all__ = [
    "DEFAULT_MAX_CHARS",
    "ColumnMap",
    "DatasetError",
    "GoldLabelError",
    "RowError",
    "count_rows",
    "dataset_columns",
    "dataset_fingerprint",
    "dataset_format",
    "iter_rows",
    "parse_mapping",
    "read_items",
    "resolve_columns",
    "row_to_item",
]

DEFAULT_MAX_CHARS = 200_000
"""Longest variable value accepted; longer ones are rejected rather than sent to a model."""

FALLBACK_COLUMNS: dict[str, tuple[str, ...]] = {
    # RAGTruth rows have no input/output columns: the score prompt judges the response
    # (output) against what the generator saw (input).
    "input": ("input", "reference"),
    "output": ("output", "response"),
}

OPTIONAL_VARIABLES = frozenset({"rubric"})
"""Slots a prompt fills from the dataset when it has the column (an item's own rubric), and
from the prompt's default otherwise: a missing or empty cell is no row error."""
_METADATA_SKIP = {"labels", "hallucinated", "source_info", "id"}

ITEM_METADATA_MAX_CHARS = 65_536
"""Most characters (names and values together) of a row's other columns kept with its item
as metadata, stored with the item and shown beside it. Columns are kept whole, in the
file's order, while they fit (a value is never cut: a group or a question is exact or
absent); those that do not are named under METADATA_LEFT_OUT. Without it a row with an
unused column of megabytes, or thousands of columns, stored all of it with every item."""

METADATA_LEFT_OUT = "juryflow_left_out"
"""The metadata key saying which columns did not fit in ITEM_METADATA_MAX_CHARS (present
only when some did not)."""

_LEFT_OUT_ROOM = 256
"""Characters of ITEM_METADATA_MAX_CHARS kept for the METADATA_LEFT_OUT note, key and value."""

_COLUMNS_LISTED = 20
"""How many of a dataset's columns an error message lists (the count says the rest)."""

SPAN_TEXT_VARIABLES = ("response", "output")
"""Where gold spans point, first present wins: the response (the score prompt's ``output``
falls back to the same column)."""

_INTEGER_RE = re.compile(r"[+-]?\d+")
_SHOWN = 60
"""How much of an offending value an error message quotes."""
_FINGERPRINT_BLOCK = 1024 * 1024
_TRUE = {"true", "t", "1", "yes", "y"}
_FALSE = {"false", "f", "0", "no", "n"}


class GoldLabelError(ValueError):
    """A row's gold labels cannot be used; the message names the label and what is wrong."""

    def __init__(self, message: str, field: str = "labels") -> None:
        super().__init__(message)
        self.field = field
        """The column to fix: 'labels' or 'hallucinated'."""


class CellError(ValueError):
    """A value that cannot be prompt text or an id (a list, an object, binary data)."""


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


def parse_mapping(pairs: Sequence[str]) -> dict[str, str]:
    """``["var=column", ...]`` from ``--map`` options."""
    mapping: dict[str, str] = {}
    for pair in pairs:
        var, sep, column = pair.partition("=")
        if not sep or not var.strip() or not column.strip():
            raise DatasetError(f"--map {pair!r}: expected VAR=COLUMN, e.g. --map response=answer")
        mapping[var.strip()] = column.strip()
    return mapping


def _listed(columns: Sequence[str]) -> str:
    """The first columns, for an error message of one readable line however wide the file."""
    shown = ", ".join(columns[:_COLUMNS_LISTED])
    more = len(columns) - _COLUMNS_LISTED
    return f"{shown}, ... ({len(columns):,} in all)" if more > 0 else shown


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
                    f"--map {var}={column}: the dataset has no column {column!r}"
                    f"{did_you_mean(column, columns)}; columns are: {_listed(columns)}"
                )
            variables[var] = column
            continue
        candidates = FALLBACK_COLUMNS.get(var, (var,))
        found = next((c for c in candidates if c in available), None)
        if found is None and var in OPTIONAL_VARIABLES:
            continue
        if found is None:
            close = next(filter(None, (closest(c, columns) for c in candidates)), None)
            fix = f"--map {var}={close}" if close else f"--map {var}=COLUMN"
            raise DatasetError(
                f"the panel's prompts need variable {var!r} but the dataset has no column "
                f"{' or '.join(repr(c) for c in candidates)}; map one with {fix} "
                f"(columns are: {_listed(columns)})"
            )
        variables[var] = found
    # Looked up in every row even when the columns seen so far lack them: a JSONL file's
    # columns come from its first rows, and gold labels that start later must be checked
    # too. A row without them simply has none.
    return ColumnMap(
        variables=variables,
        id_column="id",
        labels_column="labels",
        hallucinated_column="hallucinated",
    )


def dataset_columns(path: Path) -> list[str]:
    """The dataset's column names; raises DatasetError when the file cannot be read.

    A JSONL file's columns are the keys of every row, so finding them reads the whole file;
    the preflight and the flow both ask, so the answer is kept for as long as the file's
    size and modification time stay the same.
    """
    try:
        stat = path.stat()
    except OSError:
        return columns_of(path)  # it raises the DatasetError that names the problem
    _refuse_a_non_jsonl_file(path)
    return list(_columns_of_version(path.resolve(), stat.st_size, stat.st_mtime_ns))


def _refuse_a_non_jsonl_file(path: Path) -> None:
    """Raise DatasetError when a JSONL file's first non-blank line is not a JSON object.

    Every line would be a row error and the file would have no columns at all, so the
    user would hear of a missing column, not of the file being CSV (or a JSON array) under
    a .jsonl name. Later broken lines stay row errors: the first line is the file's format.
    """
    if dataset_format(path) != "jsonl":
        return
    first = _first_line(path)
    if first is None:
        return
    number, text = first
    problem = _not_an_object(text)
    if problem is None:
        return
    if _looks_like_csv(text):
        raise DatasetError(
            f"{path}: line {number} is not a JSON object (it looks like a CSV header): "
            "rename the file to .csv, or write one JSON object per line"
        )
    raise DatasetError(
        f"{path}: line {number} is not a JSON object ({problem}): write one JSON object per line"
    )


_JSON_KINDS: dict[type, str] = {
    list: "a JSON array",
    str: "a JSON string",
    int: "a number",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}
"""How an error message names the JSON value a line holds instead of an object."""


def _first_line(path: Path) -> tuple[int, str] | None:
    """The first non-blank line and its number; None when there is none or it cannot be
    judged here (unreadable, over the line limit): the reader reports those itself."""
    try:
        with path.open("rb") as handle:
            number = 0
            while raw := handle.readline(DEFAULT_LINE_LIMIT + 1):
                number += 1
                if len(raw) > DEFAULT_LINE_LIMIT:
                    return None
                if raw.strip():
                    # replace: bad UTF-8 in an object stays the reader's row error, while
                    # a CSV header in another encoding is still seen not to be JSON
                    text = raw.removeprefix(codecs.BOM_UTF8).decode("utf-8", errors="replace")
                    return number, text
    except OSError:
        return None
    return None


def _not_an_object(text: str) -> str | None:
    """Why ``text`` is not a JSON object, or None when it is, or is one gone wrong (cut
    off, nested too deeply): that is a row the reader reports with its line number, like
    any later one."""
    if text.lstrip().startswith("{"):
        return None
    try:
        value = load_json(text)
    except json.JSONDecodeError as error:
        return f"malformed JSON: {error.msg} at column {error.colno}"
    except ValueError:
        return None
    if isinstance(value, dict):
        return None
    return f"it is {_JSON_KINDS.get(type(value), 'a JSON value')}"


def _looks_like_csv(text: str) -> bool:
    stripped = text.lstrip()
    return not stripped.startswith(("{", "[")) and any(sep in text for sep in ",\t;")


@functools.lru_cache(maxsize=8)
def _columns_of_version(path: Path, size: int, mtime_ns: int) -> tuple[str, ...]:
    return tuple(columns_of(path))


def iter_rows(
    path: Path, batch_rows: int = 2048, max_chars: int = DEFAULT_MAX_CHARS
) -> Iterator[RawRow]:
    """Every row as (row number, row or None, error or None), streamed."""
    # A line or field may hold several values of up to max_chars each, escaped (JSON's
    # \uXXXX is 6 bytes a character): the limits only guard against runaway lines.
    return iter_raw_rows(
        path,
        batch_rows,
        line_limit=max(DEFAULT_LINE_LIMIT, 32 * max_chars),
        field_limit=max(DEFAULT_FIELD_LIMIT, 2 * max_chars),
    )


def count_rows(path: Path) -> int | None:
    """Rows in the dataset, for progress bars (approximate for JSONL and CSV: lines)."""
    return approximate_rows(path)


def dataset_fingerprint(path: str | Path) -> str:
    """``sha256:<hex digest>:<size in bytes>`` of the file's content, read in 1 MiB blocks.

    Cheap enough to take at the start of a run and again at ``--resume``: a different value
    means the dataset changed in between. Raises DatasetError when the file cannot be read.
    """
    file = Path(path)
    digest = hashlib.sha256()
    size = 0
    buffer = bytearray(_FINGERPRINT_BLOCK)
    view = memoryview(buffer)
    try:
        with file.open("rb", buffering=0) as handle:
            while read := handle.readinto(buffer):
                digest.update(view[:read])
                size += read
    except FileNotFoundError:
        raise DatasetError(f"dataset {file} does not exist") from None
    except OSError as error:
        raise DatasetError(f"dataset {file} cannot be read: {error.strerror}") from None
    return f"sha256:{digest.hexdigest()}:{size}"


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


def _offset(value: object, label: int, field: str) -> int:
    """A label's start or end as an int; raises GoldLabelError naming what it is instead."""
    if isinstance(value, str) and _INTEGER_RE.fullmatch(value.strip()):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    # A whole number written as 3.0 (or a Parquet DOUBLE or DECIMAL) is still an offset.
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
            raw = load_json(raw)  # a CSV cell, or a Parquet column of JSON text
        except json.JSONDecodeError as error:
            raise GoldLabelError(
                f"'labels' is not valid JSON ({error.msg} at column {error.colno})"
            ) from None
        except ValueError as error:  # nested too deeply; an integer of 4,300+ digits
            raise GoldLabelError(f"'labels' is not valid JSON ({error})") from None
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
        label = raw
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


def _flag(value: object) -> bool | None:
    """The ``hallucinated`` column as a bool (None when blank); raises GoldLabelError."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if not word:
            return None
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
    raise GoldLabelError(
        f"'hallucinated' must be true or false, got {_shown(value)}", field="hallucinated"
    )


def _gold(row: Mapping[str, Any], columns: ColumnMap, bound: _SpanBound) -> GoldLabels | None:
    raw = row.get(columns.labels_column) if columns.labels_column else None
    labels = _label_list(raw)
    spans = _gold_spans(labels, bound) if labels else ()
    raw_flag = row.get(columns.hallucinated_column) if columns.hallucinated_column else None
    hallucinated = _flag(raw_flag)
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


def cell_text(value: object) -> str | None:
    """A scalar cell as text (None stays None); raises CellError for a list, an object or
    binary data that is not UTF-8.

    Numbers and booleans take their JSON form, so a column with an odd number in it reads
    the same whatever the other rows hold.
    """
    if value is None:
        return None
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as error:
                # JSON may escape half a surrogate pair ("\ud800"): no store or model API
                # takes that text, so it stops here rather than failing a chunk's write.
                code = ord(value[error.start])
                raise CellError(
                    f"holds an unpaired surrogate (\\u{code:04x}), which is not valid Unicode"
                ) from None
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return str(value)
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise CellError("is binary data, not UTF-8 text") from None
    if isinstance(value, list | tuple):
        raise CellError(f"is a list ({_shown(list(value))}), not text")
    if isinstance(value, dict):
        raise CellError("is an object, not text")
    raise CellError(f"is a {type(value).__name__}, not text")


def _item_id(number: int, row: Mapping[str, Any], columns: ColumnMap) -> str:
    """The row's id as text (``row-N`` when it has none); raises CellError."""
    raw = row.get(columns.id_column) if columns.id_column else None
    try:
        text = cell_text(raw)
    except CellError as error:
        raise CellError(
            f"column {columns.id_column!r} (the id) {error}; ids must be strings or numbers"
        ) from None
    return text if text else f"row-{number}"


def row_to_item(
    number: int, row: Mapping[str, Any], columns: ColumnMap, max_chars: int
) -> Item | RowError:
    try:
        item_id = _item_id(number, row, columns)
    except CellError as error:
        return RowError(number, None, str(error))
    variables: dict[str, str] = {}
    for var, column in columns.variables.items():
        try:
            text = cell_text(row.get(column))
        except CellError as error:
            return RowError(
                number,
                item_id,
                f"column {column!r} (variable {var!r}) {error}; put the text itself in it",
            )
        if var in OPTIONAL_VARIABLES and (text is None or not text.strip()):
            continue  # the prompt's default stands in
        if text is None:
            return RowError(number, item_id, f"column {column!r} (variable {var!r}) is missing")
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
            number, item_id, f"bad gold labels: {error}; fix or remove the row's {error.field!r}"
        )
    used = set(columns.variables.values()) | _METADATA_SKIP
    return Item(item_id, variables, gold, number, item_metadata(row, used))


def item_metadata(row: Mapping[str, Any], used: set[str]) -> dict[str, str]:
    """The row's scalar columns not in ``used``, as text, within ITEM_METADATA_MAX_CHARS."""
    metadata: dict[str, str] = {}
    room = ITEM_METADATA_MAX_CHARS - _LEFT_OUT_ROOM
    left_out: list[str] = []
    for key, value in row.items():
        if key in used or not isinstance(value, str | int | float | bool):
            continue
        text = str(value)
        size = len(key) + len(text)
        if size > room:
            left_out.append(key)
            continue
        metadata[key] = text
        room -= size
    if left_out:
        metadata[METADATA_LEFT_OUT] = _left_out_note(left_out)
    return metadata


def _left_out_note(left_out: Sequence[str]) -> str:
    count = f"{len(left_out):,} column{'s' if len(left_out) > 1 else ''}"
    note = f"{count} over the {ITEM_METADATA_MAX_CHARS:,}-character metadata limit: "
    room = _LEFT_OUT_ROOM - len(METADATA_LEFT_OUT) - len(note)
    names = ", ".join(left_out)
    return note + (names if len(names) <= room else names[: room - 3] + "...")


def read_items(
    path: str | Path,
    needed: Sequence[str],
    overrides: Mapping[str, str] | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> Iterator[Item | RowError]:
    """Items of the dataset in file order, streamed; duplicate ids are row errors.

    Raises DatasetError up front when the file as a whole cannot be read (missing, unknown
    format, no header, not Parquet, a needed column absent); after that, every problem is
    a row error.
    """
    file = Path(path)
    columns = resolve_columns(dataset_columns(file), needed, overrides or {})
    seen: dict[str, tuple[int, bool]] = {}
    """Ids so far: the row that has each, and whether juryflow made it up (``row-N``)."""
    for number, row, error in iter_rows(file, max_chars=max_chars):
        if row is None:
            yield RowError(number, None, error or "unreadable row")
            continue
        result = row_to_item(number, row, columns, max_chars)
        if isinstance(result, Item):
            made_up = not cell_text(row.get(columns.id_column)) if columns.id_column else True
            if result.item_id in seen:
                yield _duplicate(number, result.item_id, made_up, *seen[result.item_id])
                continue
            seen[result.item_id] = (number, made_up)
        yield result


def _duplicate(number: int, item_id: str, made_up: bool, at: int, made_up_at: bool) -> RowError:
    """Row ``number``'s error: its id ``item_id`` (``made_up`` by juryflow, or the row's
    own) is already row ``at``'s (made up there, or not)."""
    if made_up:
        # The row has no id at all: the one juryflow would give it, row-N, is an earlier
        # row's own id (a made-up id names its own row, so never another's made-up one).
        return RowError(
            number,
            None,
            f"the row has no id, and the one juryflow gives a row without one, {item_id!r}, "
            f"is row {at}'s id; give this row an id of its own",
        )
    if made_up_at:
        # a real id that happens to be the one given to an earlier row without an id
        return RowError(
            number,
            item_id,
            f"id {item_id!r} is also the id juryflow gave row {at}, which has none; "
            f"give row {at} an id of its own (or this row another one)",
        )
    return RowError(number, item_id, f"duplicate id {item_id!r}")


def select_items(
    rows: Iterator[Item | RowError],
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> Iterator[Item | RowError]:
    """The rows a run judges: all of them, the first ``limit`` items, or ``sample`` items
    drawn uniformly (seeded) from the whole file, yielded in file order.

    Row errors pass through as they are met (with ``limit``, only those before the last
    item taken). A sample reads the whole file first and holds only the ``sample`` items
    drawn (reservoir sampling), so the same file and seed always give the same items,
    which is what ``--resume`` relies on.

    >>> rows = [Item(str(i), {}, row_number=i) for i in range(1, 11)]
    >>> [r.item_id for r in select_items(iter(rows), limit=3)]
    ['1', '2', '3']
    >>> picked = [r.item_id for r in select_items(iter(rows), sample=4, seed=7)]
    >>> len(picked), picked == sorted(picked, key=int)
    (4, True)
    >>> picked == [r.item_id for r in select_items(iter(rows), sample=4, seed=7)]
    True
    """
    if limit is not None and sample is not None:
        raise ValueError("give --limit or --sample, not both")
    if limit is None and sample is None:
        yield from rows
        return
    if limit is not None:
        taken = 0
        if limit <= 0:
            return
        for row in rows:
            yield row
            if isinstance(row, Item):
                taken += 1
                if taken >= limit:
                    return
        return
    assert sample is not None
    import random

    rng = random.Random(seed)
    reservoir: list[Item] = []
    seen = 0
    for row in rows:
        if not isinstance(row, Item):
            yield row
            continue
        seen += 1
        if len(reservoir) < sample:
            reservoir.append(row)
        else:
            slot = rng.randrange(seen)
            if slot < sample:
                reservoir[slot] = row
    yield from sorted(reservoir, key=lambda item: item.row_number)
