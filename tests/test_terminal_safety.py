"""Data reaches the terminal as plain, escaped text: issue 10, point 6.

Item ids, texts, a panel name, a suite name and a store path carry rich markup
(``[/]``, ``[link=...]``, ``[bold red]``) and control characters (ESC, BEL, the C1 CSI
0x9b). Every command runs as a real subprocess twice: with a terminal forced
(``FORCE_COLOR``), where rich would interpret markup and emit hyperlinks if the data
were passed to it as markup, and piped, where no escape byte may appear at all.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from juryflow.terminal.output import dump_json, print_run_summary, safe_text
from tests.conftest import REPO, SAMPLE

ESC, BEL, CSI8 = "\x1b", "\x07", "\x9b"
HOSTILE_IDS = [
    "[/]",
    "[link=http://x]y[/link]",
    "[bold red]boom \x1b[31mred\x07",
    "c1\x9b2J \u202eevil",
]
HOSTILE_TAIL = (
    " [/] [link=http://x]y[/link] [bold red] \x1b[31m \x07 \x9b Zorglub Quux opened in 1987."
)
# judge ids are restricted to [A-Za-z0-9_.:-] by the panel file; its name is free text
JUDGE_IDS = ["numbers", "names", "content"]
PANEL_NAME = "[bold red]panel\x1b]8;;http://x\x07"
SUITE = "[/]suite\x1b[2J"
# rich's own output on a terminal: colours and styles, cursor hide/show and line erase of
# the progress bar. Anything else starting with ESC came from data.
RICH_OWN = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\?25[lh]|\x1b\[2K|\x1b\[1A")


@dataclass(frozen=True)
class Hostile:
    dataset: Path
    panel: Path
    db: Path
    run_id: str
    run_output: str


def hostile_dataset(path: Path) -> None:
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:6]]
    lines = []
    for k, row in enumerate(rows):
        item = {key: row[key] for key in ("reference", "response", "labels", "hallucinated")}
        item["id"] = HOSTILE_IDS[k] if k < len(HOSTILE_IDS) else f"plain-{k}"
        item["response"] += HOSTILE_TAIL  # appended: the gold label offsets still hold
        lines.append(json.dumps(item))
    # rejected rows whose errors quote the data: a duplicate id, labels that are not offsets
    lines.append(json.dumps({**json.loads(lines[0]), "response": "again"}))
    bad = {**json.loads(lines[1]), "id": "bad-labels"}
    bad["labels"] = [{"start": "[/]\x1b[31m[link=http://x]", "end": 3}]
    lines.append(json.dumps(bad))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def hostile_panel(path: Path) -> None:
    detectors = ["numbers", "names", "content"]
    panel = {
        "name": PANEL_NAME,
        "judges": [
            {"id": judge, "provider": "offline", "detector": detector}
            for judge, detector in zip(JUDGE_IDS, detectors, strict=True)
        ],
    }
    path.write_text(json.dumps(panel), encoding="utf-8")  # YAML reads JSON


def child_env(*, terminal: bool) -> dict[str, str]:
    from prefect.settings import get_current_settings

    env = {k: v for k, v in os.environ.items() if k not in {"FORCE_COLOR", "TTY_COMPATIBLE"}}
    env.pop("NO_COLOR", None)
    env.update(
        PREFECT_API_URL=str(get_current_settings().api.url),
        PYTHONPATH=str(REPO),
        COLUMNS="250",
    )
    if terminal:
        env.update(FORCE_COLOR="1", TERM="xterm-256color")
    else:
        env["TERM"] = "dumb"
    return env


def juryflow(*args: str, terminal: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "juryflow", *args],
        env=child_env(terminal=terminal),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def assert_safe(output: str, *, terminal: bool) -> None:
    assert "Traceback" not in output
    assert "\x1b]8;" not in output, "a hyperlink (OSC 8) reached the terminal"
    for raw in (BEL, CSI8, "\u202e"):
        assert raw not in output, f"raw {raw!r} reached the terminal"
    if terminal:
        assert ESC not in RICH_OWN.sub("", output), "an escape sequence from data"
    else:
        assert ESC not in output


@pytest.fixture(scope="module")
def hostile(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    root = tmp_path_factory.mktemp("hostile")
    dataset, panel = root / "hostile.jsonl", root / "panel.yaml"
    hostile_dataset(dataset)
    hostile_panel(panel)
    # the store's directory name is data too: it is printed in the summary
    store_dir = root / "[link=x]db [bold red]"
    store_dir.mkdir()
    db = store_dir / "store.duckdb"
    result = juryflow("run", str(dataset), "--panel", str(panel), "--db", str(db), terminal=True)
    assert result.returncode == 0, result.stdout + result.stderr
    listed = juryflow(
        "sql", "SELECT run_id FROM runs", "--db", str(db), "-f", "csv", terminal=False
    )
    run_id = listed.stdout.splitlines()[1]
    yield Hostile(dataset, panel, db, run_id, result.stdout + result.stderr)


def test_the_run_completes_and_its_summary_shows_the_data_escaped(hostile: Hostile) -> None:
    out = hostile.run_output
    assert_safe(out, terminal=True)
    assert "rejected rows" in out
    assert "duplicate id '[/]'" in out
    assert "[/]\\x1b[31m[link=http://x]" in out  # the bad label, quoted and escaped
    assert "[link=x]db [bold red]" in out  # the store path, literally


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_disagreements_table_and_json(hostile: Hostile, terminal: bool) -> None:
    db = str(hostile.db)
    table = juryflow("disagreements", "--db", db, "--top", "6", terminal=terminal)
    assert table.returncode == 0, table.stderr
    assert_safe(table.stdout + table.stderr, terminal=terminal)
    for shown in (
        "#", "[/]", "[link=http://x]y[/link]", "[bold red]boom \\x1b[31mred\\x07",
        "c1\\x9b2J \\u202eevil",
    ):  # fmt: skip
        assert shown in table.stdout, shown
    as_json = juryflow("disagreements", "--db", db, "--top", "6", "-f", "json", terminal=terminal)
    assert as_json.returncode == 0, as_json.stderr
    assert_safe(as_json.stdout, terminal=False)  # JSON carries its own escapes, never raw
    items = json.loads(as_json.stdout)
    assert set(HOSTILE_IDS) <= {i["item_id"] for i in items}
    assert {j["judge_id"] for j in items[0]["judges"]} == set(JUDGE_IDS)


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_agreement_table_and_json(hostile: Hostile, terminal: bool) -> None:
    table = juryflow("agreement", "--db", str(hostile.db), terminal=terminal)
    assert table.returncode == 0, table.stderr
    assert_safe(table.stdout + table.stderr, terminal=terminal)
    assert "[bold red]panel\\x1b]8;;http://x\\x07" in table.stdout
    as_json = juryflow("agreement", "--db", str(hostile.db), "-f", "json", terminal=terminal)
    assert as_json.returncode == 0, as_json.stderr
    assert_safe(as_json.stdout, terminal=False)
    report = json.loads(as_json.stdout)
    assert report["judges"] == JUDGE_IDS and report["panel_name"] == PANEL_NAME


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_sql_in_all_three_formats(hostile: Hostile, terminal: bool) -> None:
    query = "SELECT item_id, judge_id FROM judgments ORDER BY item_id, judge_id"
    db = str(hostile.db)
    table = juryflow("sql", query, "--db", db, terminal=terminal)
    assert table.returncode == 0, table.stderr
    assert_safe(table.stdout, terminal=terminal)
    for shown in ("[/]", "[link=http://x]y[/link]", "[bold red]boom \\x1b[31mred\\x07"):
        assert shown in table.stdout, shown
    # a column name is data as well
    aliased = juryflow("sql", 'SELECT 1 AS "[link=http://x]col[/link]"', "--db", db,
                       terminal=terminal)  # fmt: skip
    assert aliased.returncode == 0 and "[link=http://x]col[/link]" in aliased.stdout
    assert_safe(aliased.stdout, terminal=terminal)

    as_csv = juryflow("sql", query, "--db", db, "-f", "csv", terminal=terminal)
    assert as_csv.returncode == 0, as_csv.stderr
    assert_safe(as_csv.stdout, terminal=False)
    ids = {row[0] for row in list(csv.reader(io.StringIO(as_csv.stdout)))[1:]}
    assert {safe_text(i) for i in HOSTILE_IDS} <= ids
    assert "[bold red]boom \\x1b[31mred\\x07" in ids

    as_json = juryflow("sql", query, "--db", db, "-f", "json", terminal=terminal)
    assert as_json.returncode == 0, as_json.stderr
    assert_safe(as_json.stdout, terminal=False)
    assert set(HOSTILE_IDS) <= {r["item_id"] for r in json.loads(as_json.stdout)}


def test_reaggregate_and_calibrate_printouts(hostile: Hostile) -> None:
    db = str(hostile.db)
    again = juryflow("reaggregate", hostile.run_id, "--db", db, terminal=True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert_safe(again.stdout + again.stderr, terminal=True)
    assert "[link=x]db [bold red]" in again.stdout
    name = "[/]cal\x1b[31m"
    calibrated = juryflow(
        "calibrate", hostile.run_id, "--name", name, "--folds", "2", "--db", db, terminal=True
    )
    assert "Traceback" not in calibrated.stdout + calibrated.stderr
    assert_safe(calibrated.stdout + calibrated.stderr, terminal=True)
    if calibrated.returncode == 0:
        assert "[/]cal\\x1b[31m" in calibrated.stdout
    else:  # a sample this small may be refused; the message is then one clean line
        assert calibrated.returncode == 2
        assert len(calibrated.stderr.strip().splitlines()) == 1


def test_regression_prints_a_hostile_suite_name_escaped(hostile: Hostile) -> None:
    result = juryflow(
        "regression", str(hostile.dataset), "--panel", str(hostile.panel), "--db",
        str(hostile.db), "--suite", SUITE, terminal=True,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode in (0, 1), out
    assert_safe(out, terminal=True)
    assert "[/]suite\\x1b[2J" in out


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_an_error_that_quotes_user_input_is_one_escaped_line(
    hostile: Hostile, tmp_path: Path, terminal: bool
) -> None:
    column = "[/]col\x1b[31m[link=http://x]"
    result = juryflow(
        "run", str(hostile.dataset), "--map", f"response={column}",
        "--db", str(tmp_path / "x.duckdb"), terminal=terminal,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert_safe(result.stdout + result.stderr, terminal=terminal)
    lines = RICH_OWN.sub("", result.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")
    assert "[/]col\\x1b[31m[link=http://x]" in lines[0]


# -- the helpers themselves -----------------------------------------------------------


def test_safe_text_escapes_every_control_character_visibly() -> None:
    assert safe_text("a\x1b[31mb\x07c\x9bd\x7fe\x00") == "a\\x1b[31mb\\x07c\\x9bd\\x7fe\\x00"
    assert safe_text("r\u202etl\u2066") == "r\\u202etl\\u2066"
    assert safe_text("two\nlines\tand tab") == "two\nlines\tand tab"
    assert safe_text("two\nlines\r", one_line=True) == "two\\x0alines\\x0d"
    assert safe_text("[/] [link=http://x]é ✓ α[/link]") == "[/] [link=http://x]é ✓ α[/link]"
    assert safe_text(42) == "42"


def test_dump_json_round_trips_with_no_raw_control_character() -> None:
    payload = {"k\x1b": ["\x1b[31m", "\x07", "\x9b", "\x7f", "\u202e", "é"]}
    text = dump_json(payload)
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", text)
    assert "é" in text
    assert json.loads(text) == payload


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_the_run_summary_printer_with_hostile_values(terminal: bool) -> None:
    buffer = io.StringIO()
    console = (
        Console(file=buffer, force_terminal=True, color_system="truecolor", width=200)
        if terminal
        else Console(file=buffer, force_terminal=False, color_system=None, width=200)
    )
    summary = {
        "run_id": "[/]run\x1b[31m",
        "items": 1, "judges": 1, "scored": 1, "unscored": 0, "rejected_rows": 1,
        "rejected": [{"row": 3, "error": "duplicate id '[/]' \x1b]8;;http://x\x07y"}],
        "db": "[link=http://x]db[/link]\x9b.duckdb",
    }  # fmt: skip
    print_run_summary(console, summary)
    out = buffer.getvalue()
    assert_safe(out, terminal=terminal)
    assert "[/]run\\x1b[31m" in out
    assert "duplicate id '[/]' \\x1b]8;;http://x\\x07y" in out
    assert "[link=http://x]db[/link]\\x9b.duckdb" in out
