"""`juryflow import`'s reading: a file of recorded judgments, wide or long, as items and the
answers of each (item, judge[, sample]), every row that cannot be used a
:class:`~juryflow.storage.datasets.RowError` with its line (Parquet: row) number.

The file is read by the dataset loader's streaming readers
(:func:`juryflow.storage.datasets.iter_rows`), which number every row and make a broken one
(bad JSON, a CSV row with the wrong number of fields, bytes that are not UTF-8) that row's
error rather than the file's. Two layouts:

- **wide**: one row per item, a column per judge (``--judge``) and/or one column holding
  ``{judge: verdict}`` (``--judges``);
- **long**: one row per item and judge (``--judge-column``), its answer in
  ``--verdict-column`` / ``--score-column`` / ``--spans-column``, the sample it is in
  ``--sample-column``.

A judge with no answer on an item (no cell, an empty one, no row) has no judgment there.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from juryflow.analysis.recorded_values import (
    CellError,
    Polarity,
    RecordedSpan,
    is_empty,
    judge_map,
    raw_text,
    score_of,
    shown,
    spans_of,
)
from juryflow.maths.names import did_you_mean
from juryflow.storage.datasets import (
    DatasetError,
    RowError,
    cell_text,
    dataset_columns,
    dataset_format,
    iter_rows,
)

DUPLICATE_IDS = (
    "an item id repeats: give each row an id of its own, name a unique id column with --id, "
    "or pass --row-ids to number the items by row"
)


class RecordedImportError(ValueError):
    """The file or the options cannot be imported; the message names the fix."""


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """What the columns of a file of recorded judgments are (``juryflow import``'s options)."""

    judge_columns: tuple[str, ...] = ()
    """Wide: one column per judge, named as the judge (``--judge``)."""
    judges_map: str | None = None
    """Wide: a column holding ``{judge: verdict}`` (``--judges``)."""
    judge_column: str | None = None
    """Long: the column naming each row's judge (``--judge-column``)."""
    verdict_column: str | None = None
    score_column: str | None = None
    spans_column: str | None = None
    sample_column: str | None = None
    id_column: str | None = None
    """The item id; default ``id`` when the file has it, else the row number."""
    row_ids: bool = False
    """Number the items by row even though the file has ids (which repeat)."""
    group_column: str | None = None
    text_column: str | None = None
    """The judged text (stored as the ``response`` variable); default ``response``."""
    context_columns: tuple[str, ...] = ()
    label_column: str | None = None
    label_spans_column: str | None = None
    positive: str = "true"
    """The value that stands for the positive class (what a flagged verdict means)."""
    threshold: float = 0.5
    """A score at or above it is a flagged verdict."""
    quorum: int | None = None
    skip_bad_rows: bool = False
    suite: str | None = None

    @property
    def layout(self) -> Literal["wide", "long"]:
        return "long" if self.judge_column is not None else "wide"

    @property
    def answer_columns(self) -> list[str]:
        found = (self.verdict_column, self.score_column, self.spans_column)
        return [c for c in found if c is not None]


@dataclass(frozen=True, slots=True)
class RecordedItem:
    item_id: str
    row_number: int
    text: str
    variables: dict[str, str]
    """The judged text as ``response`` and the ``--context`` columns."""
    label: bool | None
    label_spans: tuple[tuple[int, int], ...] | None
    metadata: dict[str, str]


@dataclass(frozen=True, slots=True)
class RecordedAnswer:
    """One judge's answer on one item (one sample of it), as the file gives it."""

    item_id: str
    judge: str
    sample: int | None
    score: float | None
    """From the verdict (1.0 / 0.0) or the score column; None: from the spans."""
    spans: tuple[RecordedSpan, ...] | None
    """None: the file gives no spans for this answer."""
    raw: str


@dataclass(frozen=True, slots=True)
class RecordedRows:
    columns: list[str]
    unit: str
    """What a row number counts: ``line`` (JSONL, CSV) or ``row`` (Parquet)."""
    items: list[RecordedItem] = field(default_factory=list)
    answers: list[RecordedAnswer] = field(default_factory=list)
    judges: list[str] = field(default_factory=list)
    """In the options' order, then as first met in the file."""
    errors: list[RowError] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    """How to fix the errors, once each (the errors themselves stay short)."""


def _unknown(column: str, option: str, columns: list[str]) -> RecordedImportError:
    return RecordedImportError(
        f"{option} {column}: the file has no column {column!r}"
        f"{did_you_mean(column, columns)}; its columns are: "
        f"{', '.join(columns)}"
    )


def _layout_problem(options: ImportOptions) -> str | None:
    wide = bool(options.judge_columns or options.judges_map)
    if not wide and options.judge_column is None:
        return (
            "name the judges: --judge COLUMN for each judge's column, --judges COLUMN for a "
            "column of {judge: verdict}, or --judge-column COLUMN for one row per item and judge"
        )
    if wide and options.judge_column is not None:
        return (
            "--judge-column (one row per item and judge) cannot go with --judge / --judges "
            "(one row per item): choose the layout the file has"
        )
    if wide:
        given = [*options.answer_columns, options.sample_column]
        if any(given):
            return (
                "--verdict-column, --score-column, --spans-column and --sample-column go with "
                "--judge-column (one row per item and judge); in a wide file the judges' "
                "columns hold their verdicts"
            )
        return None
    if not options.answer_columns:
        return (
            "--judge-column needs the answer's column: --verdict-column, --score-column "
            "and/or --spans-column"
        )
    if options.row_ids:
        return "--row-ids fits one row per item; one row per item and judge needs --id COLUMN"
    return None


def named_columns(options: ImportOptions) -> list[tuple[str, str]]:
    """(column, option) for every column an option names."""
    single = (
        (options.judges_map, "--judges"),
        (options.judge_column, "--judge-column"),
        (options.verdict_column, "--verdict-column"),
        (options.score_column, "--score-column"),
        (options.spans_column, "--spans-column"),
        (options.sample_column, "--sample-column"),
        (options.id_column, "--id"),
        (options.group_column, "--group"),
        (options.text_column, "--text"),
        (options.label_column, "--label"),
        (options.label_spans_column, "--label-spans"),
    )
    return [
        *((column, "--judge") for column in options.judge_columns),
        *((column, "--context") for column in options.context_columns),
        *((column, option) for column, option in single if column is not None),
    ]


def check_options(options: ImportOptions, columns: list[str]) -> None:
    """Refuse options that do not fit each other or the file's columns, in one line."""
    problem = _layout_problem(options)
    if problem:
        raise RecordedImportError(problem)
    if not 0.0 < options.threshold <= 1.0:
        raise RecordedImportError(f"--threshold {options.threshold}: give one in (0, 1]")
    if not options.positive.strip():
        raise RecordedImportError("--positive is empty: give the value of the positive class")
    if options.row_ids and options.id_column is not None:
        raise RecordedImportError("--row-ids numbers the items by row: drop --id, or --row-ids")
    named = named_columns(options)
    seen: dict[str, str] = {}
    for column, option in named:
        if column not in columns:
            raise _unknown(column, option, columns)
        if column in seen and option != "--group":
            raise RecordedImportError(
                f"column {column!r} is named by both {seen[column]} and {option}; "
                "give each option a column of its own"
            )
        seen.setdefault(column, option)
    if "response" in options.context_columns:
        raise RecordedImportError(
            "--context response: the judged text is stored as 'response'; name the judged "
            "text with --text response instead"
        )
    if (options.spans_column or options.label_spans_column) and text_column(
        options, columns
    ) is None:
        raise RecordedImportError(
            "spans are character offsets into the judged text: name its column with --text "
            "COLUMN (the file has no 'response' column)"
        )
    if options.layout == "long" and id_column(options, columns) is None:
        raise RecordedImportError(
            "one row per item and judge: the rows of an item are found by its id; name the "
            "id column with --id COLUMN (the file has no 'id' column)"
        )


def text_column(options: ImportOptions, columns: list[str]) -> str | None:
    if options.text_column is not None:
        return options.text_column
    return "response" if "response" in columns else None


def id_column(options: ImportOptions, columns: list[str]) -> str | None:
    if options.row_ids:
        return None
    if options.id_column is not None:
        return options.id_column
    return "id" if "id" in columns else None


def _text(row: Mapping[str, Any], column: str | None, what: str) -> str:
    if column is None:
        return ""
    try:
        return cell_text(row.get(column)) or ""
    except ValueError as error:
        raise CellError(f"{what} (column {column!r}) {error}") from None


def _metadata(row: Mapping[str, Any], used: set[str], options: ImportOptions) -> dict[str, str]:
    """The row's other scalar columns, and its group under ``group`` (what calibration
    groups folds by, with no option)."""
    metadata = {
        key: cell_text(value) or ""
        for key, value in row.items()
        if key not in used and isinstance(value, str | int | float | bool)
    }
    if options.group_column is not None:
        group = _text(row, options.group_column, "the group")
        metadata[options.group_column] = group
        metadata["group"] = group
    return metadata


class _Reader:
    """Reads the rows once, keeping items and answers; see :func:`read_recorded`."""

    def __init__(self, path: Path, options: ImportOptions, columns: list[str]) -> None:
        self.options = options
        self.text_column = text_column(options, columns)
        self.id_column = id_column(options, columns)
        self.out = RecordedRows(columns, "row" if dataset_format(path) == "parquet" else "line")
        self.polarity = Polarity.of(options.positive)
        self.items: dict[str, tuple[RecordedItem, int]] = {}
        self.answered: dict[tuple[str, str, int | None], int] = {}
        self.judges: dict[str, None] = dict.fromkeys(options.judge_columns)
        self.used = {column for column, _ in named_columns(options)}
        self.used |= {c for c in (self.id_column, self.text_column) if c is not None}
        self.used.discard(options.group_column or "")  # kept as metadata, as ``group`` too

    def error(self, number: int, item_id: str | None, message: str) -> None:
        self.out.errors.append(RowError(number, item_id, message))

    def item(self, number: int, row: Mapping[str, Any]) -> RecordedItem:
        options = self.options
        if self.id_column is None:
            item_id = f"row-{number}"
        else:
            item_id = _text(row, self.id_column, "the item id").strip()
            if not item_id:
                raise CellError(f"no item id in column {self.id_column!r}")
        text = _text(row, self.text_column, "the text")
        variables = {"response": text} if self.text_column else {}
        for column in options.context_columns:
            variables[column] = _text(row, column, "a --context value")
        label = None
        if options.label_column is not None:
            label = self.polarity.is_positive(row.get(options.label_column), "label")
        label_spans = None
        if options.label_spans_column is not None:
            found = spans_of(row.get(options.label_spans_column), len(text), "gold spans", False)
            label_spans = None if found is None else tuple(s for s in found if isinstance(s, tuple))
            if label is None and label_spans is not None:
                label = bool(label_spans)
        metadata = _metadata(row, self.used, options)
        return RecordedItem(item_id, number, text, variables, label, label_spans, metadata)

    def add_item(self, number: int, item: RecordedItem) -> str | None:
        """Keep ``item``; an error when another row already gave it (otherwise)."""
        known = self.items.get(item.item_id)
        if known is None:
            self.items[item.item_id] = (item, number)
            self.out.items.append(item)
            return None
        first, at = known
        unit = self.out.unit
        if self.options.layout == "wide":
            if DUPLICATE_IDS not in self.out.hints:
                self.out.hints.append(DUPLICATE_IDS)
            return f"item id {item.item_id!r} repeats {unit} {at}'s"
        for what, ours, theirs in (
            ("text", item.text, first.text),
            ("label", item.label, first.label),
            ("gold spans", item.label_spans, first.label_spans),
            ("group", item.metadata.get("group"), first.metadata.get("group")),
        ):
            if ours != theirs:
                return (
                    f"item {item.item_id!r} has another {what} than on {unit} {at}: "
                    "an item's rows must agree on it"
                )
        return None

    def answer(self, number: int, item: RecordedItem, answer: _Answer) -> None:
        key = (item.item_id, answer.judge, answer.sample)
        if key in self.answered:
            which = f"judge {answer.judge!r}"
            which += "" if answer.sample is None else f", sample {answer.sample}"
            raise CellError(
                f"item {item.item_id!r} already has an answer of {which} on "
                f"{self.out.unit} {self.answered[key]}"
            )
        score = answer.score
        if answer.verdict is not None and score is not None:
            if answer.verdict != (score >= self.options.threshold):
                raise CellError(
                    f"judge {answer.judge!r}'s verdict and score {score} disagree at "
                    f"--threshold {self.options.threshold}: fix the row, or pass the "
                    "threshold its verdicts were made at"
                )
        elif answer.verdict is not None:
            score = 1.0 if answer.verdict else 0.0
        if score is None and answer.spans is None:
            return  # no answer: the judge is absent on this item
        self.answered[key] = number
        self.judges.setdefault(answer.judge)
        raw = raw_text(answer.raw)
        self.out.answers.append(
            RecordedAnswer(item.item_id, answer.judge, answer.sample, score, answer.spans, raw)
        )


@dataclass(frozen=True, slots=True)
class _Answer:
    """A row's answer of one judge as read, before it is checked and kept."""

    judge: str
    sample: int | None
    verdict: bool | None
    score: float | None
    spans: tuple[RecordedSpan, ...] | None
    raw: object


def _wide_answers(reader: _Reader, row: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    options = reader.options
    for column in options.judge_columns:
        yield column, row.get(column)
    if options.judges_map is not None:
        found = judge_map(row.get(options.judges_map), f"--judges column {options.judges_map!r}")
        yield from (found or {}).items()


def _read_wide(reader: _Reader, number: int, row: Mapping[str, Any], item: RecordedItem) -> None:
    answers = list(_wide_answers(reader, row))  # an unreadable map refuses the whole row
    problem = reader.add_item(number, item)
    if problem:
        raise CellError(problem)
    for judge, value in answers:
        verdict = reader.polarity.is_positive(value, f"judge {judge!r}: verdict")
        reader.answer(number, item, _Answer(judge, None, verdict, None, None, value))


def _sample(value: object, column: str) -> int:
    number = None if isinstance(value, bool) else value
    if isinstance(number, str) and number.strip().lstrip("+-").isdigit():
        number = int(number)
    if isinstance(number, float) and number.is_integer():
        number = int(number)
    if not isinstance(number, int) or number < 0:
        raise CellError(f"sample {shown(value)} (column {column!r}) is not a whole number >= 0")
    return number


def _read_long(reader: _Reader, number: int, row: Mapping[str, Any], item: RecordedItem) -> None:
    options = reader.options
    assert options.judge_column is not None
    judge = _text(row, options.judge_column, "the judge").strip()
    if not judge:
        raise CellError(f"no judge in column {options.judge_column!r}")
    sample = None
    if options.sample_column is not None:
        sample = _sample(row.get(options.sample_column), options.sample_column)
    verdict = None
    if options.verdict_column is not None:
        verdict = reader.polarity.is_positive(row.get(options.verdict_column))
    score = None
    if options.score_column is not None:
        score = score_of(row.get(options.score_column))
    spans = None
    if options.spans_column is not None:
        spans = spans_of(row.get(options.spans_column), len(item.text))
    problem = reader.add_item(number, item)
    if problem:
        raise CellError(problem)
    raw = {column: row.get(column) for column in options.answer_columns}
    reader.answer(number, item, _Answer(judge, sample, verdict, score, spans, raw))


def _label_values(path: Path, column: str) -> set[str]:
    """The label column's distinct values as text (what a text verdict may be)."""
    values: set[str] = set()
    for _, row, _ in iter_rows(path):
        value = None if row is None else row.get(column)
        if not is_empty(value) and not isinstance(value, list | dict):
            values.add((cell_text(value) or "").strip())
    return values


def read_recorded(path: Path, options: ImportOptions) -> RecordedRows:
    """Every row of ``path`` read under ``options``; raises RecordedImportError (or the
    loader's DatasetError) when the file or the options cannot be used at all."""
    if not path.is_file():
        raise RecordedImportError(
            f"no file {path}: give the path of a .jsonl, .csv or .parquet file of recorded "
            "judgments"
        )
    columns = dataset_columns(path)
    if not columns:
        raise _no_rows(path)
    check_options(options, columns)
    reader = _Reader(path, options, columns)
    if options.label_column is not None and reader.polarity.kind == "text":
        reader.polarity = reader.polarity.with_labels(_label_values(path, options.label_column))
    read = _read_long if options.layout == "long" else _read_wide
    for number, row, problem in iter_rows(path):
        if row is None:
            reader.error(number, None, problem or "unreadable row")
            continue
        try:
            item = reader.item(number, row)
            read(reader, number, row, item)
        except CellError as error:
            item_id = None if not reader.id_column else cell_text(row.get(reader.id_column))
            reader.error(number, item_id, str(error))
    if not reader.out.items and not reader.out.errors:
        raise _no_rows(path)
    reader.out.judges.extend(reader.judges)
    return reader.out


def _no_rows(path: Path) -> RecordedImportError:
    if dataset_format(path) == "jsonl":
        for number, row, problem in iter_rows(path):
            if row is None:
                return RecordedImportError(
                    f"{path}: line {number} is not a JSON object ({problem}) and no line is: "
                    "is it a CSV or Parquet file? Give it the extension of its format "
                    "(.csv, .parquet)"
                )
    return RecordedImportError(f"{path} holds no rows: nothing to import")


__all__ = [
    "DatasetError",
    "ImportOptions",
    "RecordedAnswer",
    "RecordedImportError",
    "RecordedItem",
    "RecordedRows",
    "read_recorded",
]
