"""Tables in narrow terminals (issue 43): every table juryflow prints, rendered as a
terminal of 60 and of 100 columns shows it (a rich Console of that width), keeps each header
and each row's name (judge, run, item, predictor, metric) whole, never cut to `…`, and no
line is wider than the terminal.

The tables are built from three real runs in one store (the offline panel over the bundled
sample; with the stand-in, the README's pairwise run and its repeated-samples run) and the
reports read from it; the dry run from the run's own estimate, the compaction report by hand.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from juryflow.analysis.agreement_report import AgreementReport, agreement_report, disagreements
from juryflow.planning.dry_run import estimate_run
from juryflow.planning.run_request import RunRequest
from juryflow.storage.store import Store
from juryflow.terminal.output import print_dry_run
from juryflow.terminal.tables import FitTable
from tests.conftest import REPO, SAMPLE

WIDTHS = (60, 100)
PAIRS = REPO / "examples" / "ragtruth_pairs_sample.jsonl"


def _terminal(width: int) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)


@dataclass(frozen=True)
class Runs:
    db: str
    offline: str
    pairwise: str
    samples: str

    def all(self) -> tuple[str, str, str]:
        return (self.offline, self.pairwise, self.samples)


@pytest.fixture(scope="module")
def runs(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The offline panel over the bundled sample, then with the stand-in the pairwise run
    and the repeated-samples run of examples/ (pairwise and self-agreement tables), in one
    store."""
    from juryflow.flows.evaluate import evaluate
    from juryflow.standin.server import StubConfig, running_stub_server
    from juryflow.standin.simulator import load_gold

    tmp = tmp_path_factory.mktemp("narrow")
    db = str(tmp / "runs.duckdb")
    offline = asyncio.run(evaluate(RunRequest(db=db)))["run_id"]
    found: dict[str, str] = {}
    with (
        running_stub_server(StubConfig(gold=load_gold(SAMPLE))) as stub,
        pytest.MonkeyPatch.context() as env,
    ):
        env.setenv("JURYFLOW_STUB_KEY", "anything")
        base = stub.openai_base_url.removesuffix("/v1")
        for name, dataset in (("pairwise", PAIRS), ("samples", SAMPLE)):
            panel = tmp / f"panel.sim-{name}.yaml"
            example = REPO / "examples" / f"panel.sim-{name}.yaml"
            panel.write_text(
                example.read_text(encoding="utf-8").replace("http://127.0.0.1:8765", base),
                encoding="utf-8",
            )
            request = RunRequest(dataset=str(dataset), panel=str(panel), db=db)
            found[name] = str(asyncio.run(evaluate(request))["run_id"])
    return Runs(db, str(offline), found["pairwise"], found["samples"])


def _plain(value: RenderableType) -> str:
    return value.plain if isinstance(value, Text) else str(value)


def _names(table: FitTable | Table, records: bool) -> list[str]:
    """The table's headers and the cells that name its rows (its key columns); shown as
    records, the keys head each record without their own headers."""
    if isinstance(table, FitTable):
        columns = [(c.header, c.cells) for c in table.columns]
        keys = table.key_columns
    else:
        columns = [(c.header, list(c.cells)) for c in table.columns]
        keys = 1
    names = [_plain(header) for header, _ in columns[keys if records else 0 :]]
    for _, cells in columns[:keys]:
        names += [_plain(cell) for cell in cells]
    return [name for name in names if name]


def _shown(width: int, *renderables: RenderableType) -> str:
    console = _terminal(width)
    for renderable in renderables:
        console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def _assert_whole(text: str, width: int, names: Iterable[str]) -> None:
    assert "…" not in text, text
    missing = [name for name in names if name not in text]
    assert not missing, (missing, text)
    wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not wide, text


def _assert_tables_whole(width: int, *tables: FitTable | Table, ids: Iterable[str] = ()) -> str:
    """Each table whole (its headers, row names and ``ids`` among them); all of them shown."""
    shown = [_shown(width, table) for table in tables]
    for table, text in zip(tables, shown, strict=True):
        _assert_whole(text, width, _names(table, records="┃" not in text))
    everything = "".join(shown)
    _assert_whole(everything, width, ids)
    return everything


@pytest.mark.parametrize("width", WIDTHS)
def test_the_dry_run_keeps_every_judge_model_and_figure_whole(tmp_path: Path, width: int) -> None:
    panel = REPO / "examples" / "panel.sim-3span.yaml"
    estimate = estimate_run(
        RunRequest(dataset=str(SAMPLE), panel=str(panel), db=str(tmp_path / "x.duckdb"))
    )
    console = _terminal(width)
    print_dry_run(console, estimate)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "…" not in text
    for judge in estimate.judges:
        assert judge.judge_id in text and str(judge.model) in text
        assert f" {judge.calls} " in text
    assert f" {estimate.total('calls')} " in text and "total" in text
    assert max(len(line) for line in text.splitlines() if "│" in line) <= width


def test_a_fit_table_keeps_its_total_rule_in_every_part() -> None:
    table = FitTable()
    for name in ("judge", "a long column header", "another long column header"):
        table.add_column(name)
    table.add_row("j1", "1", "2")
    table.add_section()
    table.add_row("total", "1", "2")
    console = _terminal(40)
    console.print(table)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    # Two parts, each with the rule above its total.
    assert text.count("total") == 2 and text.count("├") == 2


def test_calibrates_table_keeps_its_predictor_names_at_100_columns() -> None:
    from juryflow.cli.calibration import _judges_added_table

    long_name = "best judge, chosen on the training folds"
    table = FitTable(title="t")
    for column in ("predictor", "coverage", "P", "R", "F1", "F1 interval", "span P", "span R",
                   "span F1", "span F1 interval"):  # fmt: skip
        table.add_column(column)
    table.add_row(long_name, "100 %", *(["0.912"] * 3), "0.88-0.94", *(["0.812"] * 3), "0.7-0.9")
    console = _terminal(100)
    console.print(table)
    console.print(
        _judges_added_table(
            [
                {
                    "judge": "gemini-2.5-pro",
                    "response": 0.062,
                    "response_interval": [0.025, 0.1],
                    "spans": None,
                    "span_interval": None,
                }
            ]
        )
    )
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert long_name in text and "…" not in text and "gemini-2.5-pro" in text


def test_runs_in_a_narrow_terminal_are_records_headed_by_their_id(tmp_path: Path) -> None:
    """At 60 columns `juryflow runs` stacked seven one-row tables; each run is now a record
    headed by the id the next command needs, every figure on its own line."""
    table = FitTable(records_beyond=2)
    columns = ("run_id", "status", "kind", "panel", "dataset", "items", "judgments",
               "unscored", "cost", "started", "duration")  # fmt: skip
    for name in columns:
        table.add_column(name)
    values = ("20261129-133346-fddaba", "completed", "evaluate", "sim-pairwise",
              "ragtruth_pairs_sample.jsonl", "30", "90", "33", "—", "11-29 13:33",
              "4.1 s")  # fmt: skip
    table.add_row(*values)
    narrow, wide = _terminal(60), _terminal(200)
    narrow.print(table)
    wide.print(table)
    text = narrow.file.getvalue()  # type: ignore[attr-defined]
    assert text.splitlines()[0].strip() == "20261129-133346-fddaba"
    assert "┃" not in text
    assert any(
        line.split() == ["dataset", "ragtruth_pairs_sample.jsonl"] for line in text.splitlines()
    )
    assert "┃ run_id" in wide.file.getvalue()  # type: ignore[attr-defined]


# -- every table of a stored run, at 60 and at 100 columns ------------------------------


def _agreement_tables(report: AgreementReport) -> list[FitTable]:
    """The tables `juryflow agreement` prints for the report, in its order."""
    from juryflow.cli.analysis import (
        _accuracy_table,
        _error_table,
        _group_table,
        _judges_table,
        _pairs_table,
        _reliability_table,
    )
    from juryflow.terminal.judge_table import judge_table
    from juryflow.terminal.self_agreement_table import (
        positions_table,
        preference_table,
        self_agreement_table,
        strengths_table,
    )

    everyone = report.groups[0]
    tables = [
        judge_table(report),
        _group_table(report.groups, report.has_gold),
        _pairs_table(everyone),
        _judges_table(report),
        _error_table(everyone),
        _reliability_table(report),
        _accuracy_table(report) if report.accuracy else None,
        self_agreement_table(report.self_agreement) if report.self_agreement else None,
        positions_table(report.position) if report.position else None,
    ]
    if report.preference is not None:
        tables += [preference_table(report.preference), strengths_table(report.preference)]
    return [table for table in tables if table is not None]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("run", ["offline", "pairwise", "samples"])
def test_agreements_tables_keep_their_headers_and_names_whole(
    runs: Runs, run: str, width: int
) -> None:
    report = agreement_report(Store(runs.db), getattr(runs, run))
    tables = _agreement_tables(report)
    # What each run is here for: pairwise's orders and preference, samples' self-agreement.
    assert len(tables) == {"offline": 7, "pairwise": 9, "samples": 8}[run]
    _assert_tables_whole(width, *tables, ids=report.judges)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_run_summary_keeps_its_names_the_run_id_and_the_store_whole(
    runs: Runs, width: int
) -> None:
    from juryflow.terminal.output import summary_table

    for run_id in runs.all():
        summary = {**Store(runs.db).run_summary(run_id), "run_id": run_id, "db": runs.db}
        text = _assert_tables_whole(width, summary_table(summary), ids=[run_id])
        # The store's path may fold in its cell (it is no row's name), not be cut.
        assert runs.db in "".join(text.split())


@pytest.mark.parametrize("width", WIDTHS)
def test_the_bias_table_keeps_its_judges_and_probes_whole(runs: Runs, width: int) -> None:
    from juryflow.analysis.bias_report import bias_report
    from juryflow.terminal.bias_table import bias_table

    for run_id in runs.all():
        report = bias_report(Store(runs.db), run_id)
        _assert_tables_whole(width, bias_table(report), ids=[p.probe for p in report.probes])


@pytest.mark.parametrize("width", WIDTHS)
def test_disagreements_keep_each_item_id_and_judge_whole(runs: Runs, width: int) -> None:
    from juryflow.cli.analysis import _item_heading, _item_table

    for run_id in runs.all():
        for item in disagreements(Store(runs.db), run_id, top=3):
            # The id heads the item on a line of its own; the measures follow below it.
            heading = _shown(width, _item_heading(item))
            assert heading.splitlines()[0] == f"#{item.rank} {item.item_id}"
            judges = [j.judge_id for j in item.judges]
            _assert_tables_whole(width, _item_table(item), ids=[*judges, "consensus"])


@pytest.mark.parametrize("width", WIDTHS)
def test_show_keeps_its_judges_and_models_whole(runs: Runs, width: int) -> None:
    from juryflow.cli.look import _judges_table
    from juryflow.storage.reads.item_queries import item_record

    with Store(runs.db).read() as con:
        records = [
            item_record(con, runs.pairwise, "14040-gpt-4-0613-vs-gpt-3.5-turbo-0613"),
            item_record(con, runs.offline, "13604-gpt-3.5-turbo-0613"),
        ]
    for record in records:
        assert record is not None
        models = [str(j.model) for j in record.judgments]
        _assert_tables_whole(width, _judges_table(record), ids=models)


@pytest.mark.parametrize("width", WIDTHS)
def test_calibrates_tables_keep_their_predictors_and_judges_whole(runs: Runs, width: int) -> None:
    from juryflow.analysis.calibrate import run_calibration
    from juryflow.cli.calibration import _accuracy_table, _judges_added_table

    _, record = run_calibration(Store(runs.db), runs.offline, f"narrow-{width}")
    report = record.report
    accuracy = _accuracy_table(report)
    added = _judges_added_table(report["judges_added"])
    names = [row["name"] for row in report["predictors"]]
    assert "best judge, chosen on the training folds" in names
    _assert_tables_whole(width, accuracy, added, ids=names)


@pytest.mark.parametrize("width", WIDTHS)
def test_runs_keeps_every_run_id_and_column_whole(
    runs: Runs, width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from juryflow.cli import runs as runs_module
    from juryflow.storage.reads.run_queries import list_runs

    console = _terminal(width)
    monkeypatch.setattr(runs_module, "console", console)
    runs_module.runs_command(db=runs.db, limit=20, status=None, format_="table")
    text = console.file.getvalue()  # type: ignore[attr-defined]
    listing = list_runs(Store(runs.db), limit=20)
    headers = ["status", "panel", "dataset", "items", "judgments", "cost", "duration"]
    _assert_whole(text, width, [*runs.all(), *headers])
    assert listing.columns[0] == "run_id" and len(listing.rows) == 3


@pytest.mark.parametrize("width", WIDTHS)
def test_sql_rows_keep_their_columns_and_first_column_whole(runs: Runs, width: int) -> None:
    from juryflow.terminal.output import print_rows

    with Store(runs.db).read() as con:
        query = con.execute(
            "SELECT item_id, run_id, judge_id, score, verdict, unscored_reason FROM judgments "
            "WHERE run_id = ? ORDER BY unscored_reason NULLS LAST, item_id LIMIT 4",
            [runs.pairwise],
        )
        columns = [d[0] for d in query.description]
        rows = query.fetchall()
    console = _terminal(width)
    print_rows(console, columns, rows, "table", limit=10)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    # Item ids up to 45 characters: at 60 columns each row is a record headed by its id.
    headers = columns if "┃" in text else columns[1:]
    _assert_whole(text, width, [*headers, *(row[0] for row in rows), runs.pairwise])


@pytest.mark.parametrize("width", WIDTHS)
def test_store_compact_keeps_its_steps_whole(
    tmp_path: Path, width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from juryflow.cli import store
    from juryflow.cli.store import _print_report, _steps
    from juryflow.storage.lake.maintenance import CompactionReport

    path = str(tmp_path / "a-store-with-a-rather-long-name" / "lake.ducklake")
    console = _terminal(width)
    monkeypatch.setattr(store, "console", console)
    for dry_run in (False, True):
        report = CompactionReport(
            store=path, dry_run=dry_run, keep_days=7, grace_hours=24, inlined_rows=1204,
            files_before=48, files_after=3, files_merged=46, files_written=1,
            data_bytes_before=9_437_184, data_bytes_after=3_145_728, snapshots_before=91,
            snapshots_expired=80, snapshots_kept_for_runs=4, old_files_deleted=46,
            orphaned_files_deleted=2, bytes_freed=6_291_456,
        )  # fmt: skip
        _print_report(report)
        steps = [step for step, _ in _steps(report)]
        text = console.file.getvalue()  # type: ignore[attr-defined]
        _assert_whole(text, width, ["step", "result", *steps])
        # The title's path may fold (it is no row's name), never be cut.
        assert path in "".join(text.split())
