"""--limit N and --sample N --seed S: which items a run judges, and that a resume keeps them."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.maths.records import Item
from juryflow.storage.datasets import RowError, select_items
from juryflow.storage.store import Store
from tests.conftest import SAMPLE

runner = CliRunner()


def _rows(n: int, bad: set[int]) -> list[Item | RowError]:
    return [
        RowError(i, None, "bad") if i in bad else Item(f"i{i}", {}, row_number=i)
        for i in range(1, n + 1)
    ]


@settings(deadline=None, max_examples=80)
@given(
    st.integers(0, 60),
    st.sets(st.integers(1, 60), max_size=8),
    st.integers(1, 70),
    st.integers(0, 2**31 - 1),
)
def test_a_sample_is_a_seeded_subset_in_file_order(
    n: int, bad: set[int], size: int, seed: int
) -> None:
    rows = _rows(n, bad)
    items = [r for r in rows if isinstance(r, Item)]
    picked = list(select_items(iter(rows), sample=size, seed=seed))
    chosen = [r for r in picked if isinstance(r, Item)]
    assert len(chosen) == min(size, len(items))
    assert {i.item_id for i in chosen} <= {i.item_id for i in items}
    assert [i.row_number for i in chosen] == sorted(i.row_number for i in chosen)
    assert [r.row_number for r in picked if isinstance(r, RowError)] == sorted(
        b for b in bad if b <= n
    )  # every row error of the file is still reported
    again = list(select_items(iter(rows), sample=size, seed=seed))
    assert [r.row_number for r in again] == [r.row_number for r in picked]


@settings(deadline=None, max_examples=80)
@given(st.integers(0, 60), st.sets(st.integers(1, 60), max_size=8), st.integers(1, 70))
def test_a_limit_takes_the_first_items_and_the_errors_before_them(
    n: int, bad: set[int], limit: int
) -> None:
    rows = _rows(n, bad)
    picked = list(select_items(iter(rows), limit=limit))
    items = [r for r in rows if isinstance(r, Item)][:limit]
    assert [r for r in picked if isinstance(r, Item)] == items
    last = items[-1].row_number if items and len(items) == limit else n
    assert [r.row_number for r in picked if isinstance(r, RowError)] == sorted(
        b for b in bad if b <= min(last, n)
    )


def _item_ids(db: Path) -> list[str]:
    return [r[0] for r in Store(db).query("SELECT item_id FROM items ORDER BY row_number")[1]]


def test_run_limit_and_sample_judge_only_those_items(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    limited = runner.invoke(app, ["run", str(SAMPLE), "--limit", "5", "--db", str(db)])
    assert limited.exit_code == 0, limited.output
    first_five = _item_ids(db)
    assert len(first_five) == 5
    assert Store(db).query("SELECT count(*) FROM judgments")[1] == [(15,)]

    ids: list[list[str]] = []
    for _ in range(2):
        other = tmp_path / f"s{len(ids)}.duckdb"
        result = runner.invoke(
            app, ["run", str(SAMPLE), "--sample", "7", "--seed", "3", "--db", str(other)]
        )
        assert result.exit_code == 0, result.output
        ids.append(_item_ids(other))
    assert len(ids[0]) == 7 and ids[0] == ids[1]
    assert ids[0] != first_five[:7]


def test_limit_and_sample_are_checked_up_front(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    for args in (["--limit", "2", "--sample", "3"], ["--limit", "0"], ["--sample", "-1"]):
        result = runner.invoke(app, ["run", str(SAMPLE), *args, "--db", str(db)])
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output
    assert not db.exists()
    resumed = runner.invoke(app, ["run", "--resume", "r", "--limit", "3", "--db", str(db)])
    assert resumed.exit_code == 2
    assert "drop --limit" in " ".join(resumed.output.split())


def test_select_items_doctests_pass() -> None:
    import doctest

    import juryflow.storage.datasets

    result = doctest.testmod(juryflow.storage.datasets)
    assert result.attempted >= 3 and result.failed == 0
