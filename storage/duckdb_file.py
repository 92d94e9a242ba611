"""Is this path a DuckDB file? Asked before DuckDB opens it.

DuckDB answers an SQLite file by downloading and loading its SQLite extension (a network
call, and then a store that is not one), and anything else with an IO error that does not
say what to do. Every DuckDB file carries the magic bytes ``DUCK`` at offset 8.
"""

from __future__ import annotations

from pathlib import Path

MAGIC = b"DUCK"
MAGIC_AT = 8
NOT_DUCKDB = "{path} is not a DuckDB file; pass --db a juryflow store or a new path"


def not_duckdb(path: Path) -> str | None:
    """Why ``path`` cannot be opened as a store, or None (a DuckDB file, or nothing yet)."""
    if path.is_dir():
        return f"{path} is a directory; pass --db a juryflow store or a new path"
    try:
        with path.open("rb") as handle:
            header = handle.read(MAGIC_AT + len(MAGIC))
    except (FileNotFoundError, NotADirectoryError):
        return None  # nothing there: a writer creates it, a reader is told it is missing
    except OSError as error:
        return (
            f"cannot read the store {path}: {error.strerror or error}; "
            "pass --db a store you can read"
        )
    # A shorter header may be a store another process is creating this instant: DuckDB,
    # which waits for that process's lock, decides then.
    if len(header) == MAGIC_AT + len(MAGIC) and header[MAGIC_AT:] != MAGIC:
        return NOT_DUCKDB.format(path=path)
    return None
