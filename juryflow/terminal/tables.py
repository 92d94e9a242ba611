"""A table that keeps every header and every value whole at any terminal width.

rich shrinks a table wider than the terminal by cutting cells to ``0.…`` and headers to
``judgmen…``, or drops what falls past the edge: at 80 columns a figure was unreadable and
whole columns of ``juryflow runs`` were gone. :class:`FitTable` instead lays its columns at
their natural width and, when they do not fit side by side, wraps them into several
tables stacked below each other, each repeating the key columns (the row's name) first;
like a long line wrapped, not cut. Only a column too wide for the terminal on its own is
folded, character by character, never cut; the key columns and the headers stay whole even
then, and where they cannot, each row is shown as a record (its key, then one line a column).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType
from rich.table import Table
from rich.text import Text

# A column of a boxed table costs its width, one space each side and one border.
_COLUMN_EXTRA = 3


@dataclass(slots=True)
class _Column:
    header: RenderableType
    settings: dict[str, Any]
    with_previous: bool
    cells: list[RenderableType] = field(default_factory=list)


def _as_text(value: RenderableType) -> Text:
    return value if isinstance(value, Text) else Text(str(value))


def _width(value: RenderableType) -> int:
    text = value.plain if isinstance(value, Text) else str(value)
    return max((cell_len(line) for line in text.split("\n")), default=0)


class FitTable:
    """Like :class:`rich.table.Table` (``add_column``, ``add_row``), wrapped into stacked
    tables to fit the terminal. The first ``key_columns`` columns name each row and are
    repeated in every part."""

    def __init__(
        self,
        title: str | Text | None = None,
        key_columns: int = 1,
        records_beyond: int | None = None,
        **settings: Any,
    ):
        self.title = title
        self.key_columns = key_columns
        self.records_beyond = records_beyond
        """More stacked parts than this, and each row is shown as a record instead: its key
        as a heading, then one ``column  value`` line per other column (None: only when a part
        cannot keep its keys and headers whole)."""
        self.settings = settings
        self.columns: list[_Column] = []
        self.section_ends: set[int] = set()
        """Rows after which a rule is drawn (:meth:`add_section`), by index."""

    def add_column(
        self, header: RenderableType = "", *, with_previous: bool = False, **settings: Any
    ) -> None:
        """``with_previous``: never separated from the column before (a figure and its n)."""
        # Each part is laid out at natural widths; what rich would otherwise do to fit
        # (shrink, ellipsis) is what this class replaces.
        for name in ("no_wrap", "overflow", "min_width", "max_width", "width"):
            settings.pop(name, None)
        self.columns.append(_Column(header, settings, with_previous))

    def add_row(self, *cells: RenderableType) -> None:
        for column, cell in zip(self.columns, cells, strict=True):
            column.cells.append(cell)

    def add_section(self) -> None:
        """A rule below the last row added (before a total, say), in every part."""
        if self.columns and self.columns[0].cells:
            self.section_ends.add(len(self.columns[0].cells) - 1)

    def natural_width(self, columns: Sequence[_Column]) -> int:
        return 1 + sum(
            _COLUMN_EXTRA + max([_width(c.header), *(_width(v) for v in c.cells)]) for c in columns
        )

    def parts(self, width: int) -> list[list[_Column]]:
        """The columns of each stacked table: the keys, then as many others as fit."""
        keys, rest = self.columns[: self.key_columns], self.columns[self.key_columns :]
        blocks: list[list[_Column]] = []
        for column in rest:
            if column.with_previous and blocks:
                blocks[-1].append(column)
            else:
                blocks.append([column])
        parts: list[list[_Column]] = []
        current: list[_Column] = []
        for block in blocks:
            if current and self.natural_width([*keys, *current, *block]) > width:
                parts.append(current)
                current = []
            current += block
        if current or not parts:
            parts.append(current)
        return [[*keys, *part] for part in parts]

    def _keeps_whole(self, columns: Sequence[_Column], width: int) -> bool:
        """Whether the part fits with its keys and every header whole, only the other
        cells folded: a key wrapped in its cell no longer reads as the row's name."""
        keys, rest = columns[: self.key_columns], columns[self.key_columns :]
        return (
            self.natural_width(keys) + sum(_COLUMN_EXTRA + _width(c.header) for c in rest) <= width
        )

    def _table(self, columns: Sequence[_Column], width: int) -> Table:
        table = Table(**self.settings)
        # Only a part wider than the terminal on its own folds its cells (never cuts them),
        # and of those never its keys nor a header (_keeps_whole made sure they fit).
        folding = self.natural_width(columns) > width
        for index, column in enumerate(columns):
            key = index < self.key_columns
            table.add_column(
                column.header,
                overflow="fold",
                no_wrap=key or not folding,
                min_width=_width(column.header) if folding and not key else None,
                **column.settings,
            )
        for index, row in enumerate(zip(*(c.cells for c in columns), strict=True)):
            table.add_row(*row, end_section=index in self.section_ends)
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        width = options.max_width
        if self.title is not None:
            title = self.title if isinstance(self.title, Text) else Text(self.title)
            title.stylize("table.title")
            yield title
        parts = self.parts(width)
        beyond = self.records_beyond is not None and len(parts) > self.records_beyond
        if beyond or not all(self._keeps_whole(part, width) for part in parts):
            yield from self._records()
            return
        for columns in parts:
            yield self._table(columns, width)

    def _records(self) -> Iterator[RenderableType]:
        """Each row as a record: what a narrow terminal reads more easily than many stacked
        tables of one row each."""
        keys, rest = self.columns[: self.key_columns], self.columns[self.key_columns :]
        rows = len(self.columns[0].cells) if self.columns else 0
        for index in range(rows):
            heading = Text(" · ").join(_as_text(c.cells[index]) for c in keys)
            heading.stylize("bold")
            yield heading
            grid = Table.grid(padding=(0, 2))
            grid.add_column(style="dim", no_wrap=True)
            grid.add_column(overflow="fold")
            for column in rest:
                grid.add_row(column.header, column.cells[index])
            yield grid
            if index < rows - 1:
                yield Text("")
