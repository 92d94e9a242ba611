"""Time the dataset header checks on wide files (issue 44, point 6).

A CSV's header is read and checked (every name once, the column count against
``MAX_COLUMNS``) before the run's first line; before issue 44 the duplicate-name check was
quadratic (10,000 columns 13 s, 30,000 48 s, 100,000 over 200 s). For each width it writes
a CSV of one header and one row, then prints the best of ``--repeats`` times of:

- ``columns_of`` (what ``juryflow run`` asks first): past ``MAX_COLUMNS`` the file is
  refused with one line, which the bench prints;
- the header check alone with no column limit (the names all read and checked for
  repeats), to show it stays linear where the limit would not stop it.

And a JSONL row of as many keys, through ``columns_of`` (the keys of the first rows). Target:
100,000 CSV columns checked in under a second.

Run: .venv/bin/python bench/bench_dataset_headers.py [--widths 10000,30000,100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine
from juryflow.storage import dataset_readers
from juryflow.storage.dataset_readers import DatasetError, columns_of

TARGET_SECONDS = 1.0
TARGET_WIDTH = 100_000


def _write_csv(path: Path, width: int) -> None:
    names = ",".join(f"c{i}" for i in range(width))
    values = ",".join("v" for _ in range(width))
    path.write_text(f"{names}\n{values}\n", encoding="utf-8")


def _write_jsonl(path: Path, width: int) -> None:
    path.write_text(json.dumps({f"c{i}": "v" for i in range(width)}) + "\n", encoding="utf-8")


def _best(repeats: int, work: Callable[[], str]) -> tuple[float, str]:
    """The best time of ``repeats`` runs of ``work``, and what its last run said."""
    best, said = float("inf"), ""
    for _ in range(repeats):
        started = time.perf_counter()
        said = work()
        best = min(best, time.perf_counter() - started)
    return best, said


def _columns(path: Path) -> str:
    try:
        return f"{len(columns_of(path)):,} columns"
    except DatasetError as error:
        return f"refused: {error}"


def _header_alone(path: Path) -> str:
    """The CSV header check with no column limit: every name read and checked."""
    check = getattr(dataset_readers, "check_header", None)
    if check is None:  # the code before issue 44: the limit did not exist
        return _columns(path)
    fields = path.read_text(encoding="utf-8").splitlines()[0].split(",")
    return f"{len(check(path, fields, limit=None)):,} names, none repeated"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default="10000,30000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    widths = [int(w) for w in args.widths.split(",")]
    print(f"machine: {machine()}")
    limit = getattr(dataset_readers, "MAX_COLUMNS", None)
    print(f"MAX_COLUMNS: {limit:,}" if limit is not None else "MAX_COLUMNS: (none)")
    at_target: float | None = None
    with tempfile.TemporaryDirectory(prefix="bench-headers-") as tmp:
        for width in widths:
            csv_path = Path(tmp) / f"wide-{width}.csv"
            jsonl_path = Path(tmp) / f"wide-{width}.jsonl"
            _write_csv(csv_path, width)
            _write_jsonl(jsonl_path, width)
            seconds, said = _best(args.repeats, partial(_columns, csv_path))
            print(f"CSV {width:,} columns, columns_of: {seconds:.4f} s ({said})")
            if width == TARGET_WIDTH:
                at_target = seconds
            seconds, said = _best(args.repeats, partial(_header_alone, csv_path))
            print(
                f"CSV {width:,} columns, header check without the limit: {seconds:.4f} s ({said})"
            )
            seconds, said = _best(args.repeats, partial(_columns, jsonl_path))
            print(f"JSONL {width:,} keys, columns_of: {seconds:.4f} s ({said})")
    if at_target is None:
        print(f"target: {TARGET_WIDTH:,} CSV columns in under {TARGET_SECONDS:g} s: not measured")
    else:
        met = "yes" if at_target < TARGET_SECONDS else "no"
        print(
            f"target: {TARGET_WIDTH:,} CSV columns in under {TARGET_SECONDS:g} s: "
            f"{at_target:.4f} s, met: {met}"
        )


if __name__ == "__main__":
    main()
