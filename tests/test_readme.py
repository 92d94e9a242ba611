"""Every command the README and the documentation site show is run here or by a named test
or CI script.

The pages are README.md and every page under docs/ written there (a page that is a link to a
file elsewhere in the repository, such as bench/README.md, is that file's: its own tests run
its commands). A command in a page's ```bash block (or a ``$ `` line of a transcript) is
either

- run by this module against a real store made by ``juryflow run`` on the bundled sample
  (the ``juryflow sql`` queries, ``juryflow agreement``, ``juryflow disagreements``), or
- listed in :data:`ELSEWHERE` with the test or CI script that runs it, whose file must
  exist and mention it, or with the reason it is shown for reference only (API keys,
  network, a server that runs until Ctrl-C).

A command in neither fails, so a page that drifts from the code fails CI. The inline
``juryflow X`` commands of the pages' tables must name commands the CLI has.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from tests.conftest import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
JURYFLOW = str(Path(sys.executable).with_name("juryflow"))
_FENCE = re.compile(r"^\s*```(\w*)\s*$")
# Words the README uses for "put yours here": such a command cannot run as shown.
_PLACEHOLDER = re.compile(r"^\[.*\]$|^(RUN|DATASET|PANEL)$|<[a-z ]+>|\.\.\.")
RUN_HERE = ("sql", "agreement", "disagreements")


@dataclass(frozen=True)
class Command:
    line: int
    argv: tuple[str, ...]
    page: Path = README

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}: {self.text}"

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.argv).split())

    @property
    def runs_here(self) -> bool:
        return (
            len(self.argv) > 1
            and self.argv[0] == "juryflow"
            and self.argv[1] in RUN_HERE
            and not any(_PLACEHOLDER.search(arg) for arg in self.argv[2:])
        )


def readme_commands(text: str, page: Path = README) -> list[Command]:
    """The commands of ```bash blocks (a command may span lines: open quotes, ``\\``) and
    the ``$ `` lines of plain blocks, with comments dropped."""
    commands: list[Command] = []
    lang: str | None = None
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        fence = _FENCE.match(line)
        if fence:
            lang = None if lang is not None else fence.group(1)
            pending = ""
            continue
        if lang == "bash":
            stripped = line.strip()
            if not pending and (not stripped or stripped.startswith("#")):
                continue
            if not pending:
                start = number
            pending = f"{pending}\n{line}" if pending else line
            if pending.rstrip().endswith("\\"):
                continue
            try:
                argv = shlex.split(pending, comments=True)
            except ValueError:  # an open quote: the command goes on on the next line
                continue
            commands.append(Command(start, tuple(argv), page))
            pending = ""
        elif lang == "" and line.startswith("$ "):
            commands.append(Command(number, tuple(shlex.split(line[2:], comments=True)), page))
    return commands


# README command → (where it is run, or "reference", and a marker that file must contain /
# the reason it is only shown).
ELSEWHERE: dict[str, tuple[str, str]] = {
    "bash scripts/test.sh": (".ci/run", "bash scripts/test.sh\n"),
    "bash scripts/test.sh --slow": (".ci/run", "bash scripts/test.sh --slow"),
    "bash scripts/run-sample.sh": (".ci/run", "bash scripts/run-sample.sh"),
    # the contributor's plain editable install; tests/test_package.py runs the sample on one
    "python3 -m venv .venv": ("scripts/install.sh", "python3 -m venv .venv"),
    ".venv/bin/python -m pip install -c constraints.txt -e .[dev]": (
        "scripts/install.sh",
        'pip install -c constraints.txt -e "$target"',
    ),
    "bash scripts/refresh-constraints.sh": (
        "tests/test_constraints.py",
        "refresh-constraints.sh",
    ),
    ".venv/bin/lint-imports": ("scripts/test.sh", ".venv/bin/lint-imports"),
    ".venv/bin/python bench/bench_consensus.py": (".ci/run", "bench/bench_consensus.py"),
    "juryflow reaggregate RUN --consensus spans=at_least:2 --consensus verdict=spans": (
        "tests/test_reaggregate.py",
        "consensus=[",
    ),
    "juryflow reaggregate RUN --quorum 3 --min-votes 1": (
        "tests/test_reaggregate.py",
        "--min-votes",
    ),
    "juryflow calibrate RUN --name mine [--folds 5] [--group source_id]": (
        "tests/test_calibration.py",
        "calibrate",
    ),
    "juryflow reaggregate RUN --calibration mine": ("tests/test_calibration.py", "--calibration"),
    # README "Recorded judgments: juryflow import": the command as shown (test_import checks
    # the README still shows it), then agreement and calibrate on an imported run
    "juryflow import ../shared/data/realjudges/code_feedback.jsonl --judges judges_valid "
    "--label human_valid --positive false --group source_id --text feedback --row-ids "
    "--db feedback.duckdb": (
        "tests/test_import.py",
        "def test_code_feedback_imports_as_the_readme_says",
    ),
    "juryflow agreement RUN --db feedback.duckdb": ("tests/test_import.py", '"agreement", run_id'),
    "juryflow calibrate RUN --db feedback.duckdb": ("tests/test_import.py", '"calibrate", run_id'),
    "juryflow run DATASET --panel PANEL --calibration mine": (
        "tests/test_calibration.py",
        "--calibration",
    ),
    "export ANTHROPIC_API_KEY=... OPENAI_API_KEY=...": ("reference", "needs API keys"),
    "ollama serve & ollama pull llama3.1": ("reference", "needs Ollama and a model download"),
    "juryflow run examples/ragtruth_data2txt_sample.jsonl "
    "--panel examples/panel.claude-gpt-ollama.yaml": (
        "reference",
        "needs Anthropic and OpenAI keys and an Ollama server; the same code paths run "
        "against the stand-in server in tests/test_flow_llm.py",
    ),
    # README "A local model as a judge" (issue 25): the panel file run as shipped, the
    # stand-in in Ollama's place (on a free port there: a real Ollama may hold 11434)
    "juryflow run examples/ragtruth_data2txt_sample.jsonl --panel examples/panel.local.yaml": (
        "tests/test_local_model.py",
        'REPO / "examples" / "panel.local.yaml"',
    ),
    "juryflow stub-server --dialect ollama --port 11434 &": (
        "tests/test_local_model.py",
        '"stub-server", "--dialect", "ollama"',
    ),
    "juryflow stub-server --port 8765 --latency-ms 50 &": ("tests/test_stub_server.py", "stub"),
    "juryflow stub-server --port 8765 --gold examples/ragtruth_data2txt_sample.jsonl &": (
        "tests/test_samples_runs.py",
        "juryflow stub-server --port 8765 --gold",
    ),
    "JURYFLOW_STUB_KEY=anything juryflow run examples/ragtruth_data2txt_sample.jsonl "
    "--panel examples/panel.sim-samples.yaml": (
        "tests/test_samples_runs.py",
        "panel.sim-samples.yaml",
    ),
    "JURYFLOW_STUB_KEY=anything juryflow run ../shared/data/ragtruth/data2txt_dev.jsonl "
    "--panel examples/panel.sim-bias.yaml": ("tests/test_bias.py", "panel.sim-bias.yaml"),
    # docs/how-to/pairwise.md (issue 42): the shipped pairwise panel on the stand-in with
    # the sample's gold (the stub-server line above)
    "JURYFLOW_STUB_KEY=anything juryflow run examples/ragtruth_pairs_sample.jsonl "
    "--panel examples/panel.sim-pairwise.yaml": (
        "tests/test_pairwise_runs.py",
        "panel.sim-pairwise.yaml",
    ),
    "JURYFLOW_STUB_KEY=anything juryflow regression DATASET --suite nightly "
    "--pairwise examples/panel.sim-pairwise.yaml": ("tests/test_head_to_head.py", '"--pairwise"'),
    # README "A noise floor: the A/A check" (issue 26, point 3): the shipped noisy panel on
    # a stand-in with the sample's gold (the stub-server line above), run twice, the second
    # time with the A/A check
    "JURYFLOW_STUB_KEY=anything juryflow regression --panel examples/panel.sim-noisy.yaml": (
        "tests/test_noise_floor_runs.py",
        "is the baseline",
    ),
    "JURYFLOW_STUB_KEY=anything juryflow regression --panel examples/panel.sim-noisy.yaml "
    "--no-cache --noise-floor --noise-sample 40": (
        "tests/test_noise_floor_runs.py",
        '"--noise-floor",',
    ),
    ".venv/bin/pytest -q -s tests/test_noise_floor.py -k aa_of or smallest": (
        "tests/test_noise_floor.py",
        "def test_aa_of_a_noisy_panel",
    ),
    "juryflow stub-server --port 8765 --gold ../shared/data/ragtruth/data2txt_dev.jsonl &": (
        "tests/test_stub_sim.py",
        "--gold",
    ),
    "JURYFLOW_STUB_KEY=anything juryflow run ../shared/data/ragtruth/data2txt_dev.jsonl "
    "--panel examples/panel.sim-3span.yaml --early-stop": (
        "tests/test_early_stop_runs.py",
        "early_stop=True",
    ),
    "JURYFLOW_STUB_KEY=anything juryflow run ../shared/data/ragtruth/data2txt_dev.jsonl "
    "--panel examples/panel.sim-3span-lossy.yaml": (
        "tests/test_lossy_stop.py",
        "panel.sim-3span-lossy.yaml",
    ),
    "JURYFLOW_STUB_KEY=anything juryflow run --panel examples/panel.stub.yaml": (
        "tests/test_runs_cli.py",
        "panel.stub.yaml",
    ),
    "juryflow report [RUN] -o report.html": ("tests/test_report.py", "report"),
    "juryflow report RUN --gold annotations -o report.html": (
        "tests/test_report.py",
        '"--gold", "annotations"',
    ),
    # juryflow view serves until Ctrl-C: its tests start it as a subprocess and stop it
    "juryflow view --db evals.duckdb --reviewer alice": ("tests/test_viewer_cli.py", "alice"),
    "juryflow view --db evals.duckdb --port 0": ("tests/test_viewer_cli.py", '"--port", "0"'),
    "juryflow calibrate --gold annotations": ("tests/test_export_annotations.py", '"calibrate"'),
    "juryflow export-annotations RUN -o labels.jsonl": (
        "tests/test_export_annotations.py",
        '"export-annotations"',
    ),
    "python bench/bench_viewer.py --items 300 --batch-items 100 --repeats 2": (
        "tests/test_bench_viewer.py",
        '"--batch-items", "100"',
    ),
    "chromium --headless --no-sandbox --disable-gpu --screenshot=report.png "
    "--window-size=1280,2000 file://$PWD/report.html": ("tests/test_report.py", "--screenshot"),
    "prefect server start": ("tests/prefect_server.py", '"server", "start"'),
    "juryflow server start": ("tests/test_startup.py", '[JURYFLOW, "server", "start"'),
    "export PREFECT_API_URL=http://127.0.0.1:4200/api": (
        "tests/test_startup.py",
        '"PREFECT_API_URL": api',
    ),
    "juryflow run --limit 5": ("tests/test_startup.py", '"run", "--limit", "5"'),
    "juryflow server stop": ("tests/test_startup.py", '[JURYFLOW, "server", "stop"]'),
    "juryflow init myproject": ("tests/test_init.py", 'init("myproject"'),
    "juryflow run examples/ragtruth_data2txt_sample.jsonl --panel examples/panel.stub.yaml "
    "--dry-run": ("tests/test_dry_run.py", '"examples/panel.stub.yaml", "--dry-run"'),
    "JURYFLOW_STUB_KEY=anything juryflow run --panel examples/panel.stub.yaml --max-cost 0.25 "
    "--no-cache": ("tests/test_cached_run_cost.py", '"--max-cost", str(budget), "--no-cache"'),
    "JURYFLOW_STUB_KEY=anything juryflow run --resume RUN --max-cost 0.25": (
        "tests/test_max_cost.py",
        '"--resume", run_id, "--db", str(db), "--max-cost"',
    ),
    "JURYFLOW_STUB_KEY=anything juryflow run --panel examples/panel.stub.yaml --batch": (
        "tests/test_batch_interrupts.py",
        "juryflow run --panel examples/panel.stub.yaml --batch",
    ),
    "juryflow run examples/ragtruth_data2txt_sample.jsonl --panel examples/panel.stub.yaml "
    "--batch --dry-run": ("tests/test_batch_runs.py", '"--batch", "--dry-run"'),
    "JURYFLOW_STUB_KEY=anything juryflow run --resume RUN": (
        "tests/test_max_cost.py",
        'run_cli("--resume", run_id, "--db", str(db))',
    ),
    "cd myproject && juryflow run data.jsonl --panel panel.yaml": (
        "tests/test_init.py",
        'assert argv[:3] == ["cd", "myproject", "&&"]',
    ),
    "juryflow stub-server --port 8765 &": ("tests/test_init.py", '"stub-server", "--port"'),
    "juryflow run data.jsonl --panel panel.yaml --workers 2": (
        "tests/test_workers.py",
        '"--workers", "2"',
    ),
    "juryflow run data.jsonl --panel panel.yaml --workers auto": (
        "tests/test_workers.py",
        '"--workers", "auto"',
    ),
    "juryflow run data.jsonl --panel panel_llm.yaml": (
        "tests/test_init.py",
        '"run", "data.jsonl", "--panel", "panel_llm.yaml"',
    ),
    "prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api": (
        "tests/prefect_server.py",
        "PREFECT_API_URL",
    ),
    "prefect work-pool create juryflow-process --type process": (
        "tests/test_deploy.py",
        '"work-pool", "create", "juryflow-process"',
    ),
    "prefect deploy --all": ("tests/test_deploy.py", '"deploy", "--all"'),
    "prefect worker start --pool juryflow-process": (
        "reference",
        "a worker runs until stopped; tests/test_deploy.py checks the deployments it runs",
    ),
    "sed -i s/BLOCK_ID/<your block id>/ examples/automation.failed-regression.yaml": (
        "tests/test_deploy.py",
        '"BLOCK_ID"',
    ),
    "prefect automation create --from-file examples/automation.failed-regression.yaml": (
        "tests/test_deploy.py",
        '"automation", "create", "--from-file"',
    ),
    "PREFECT_API_URL=http://127.0.0.1:4200/api juryflow serve [DATASET] --panel PANEL": (
        "tests/test_deploy.py",
        "juryflow serve",
    ),
    # README "Many machines" (issue 14)
    "pip install juryflow[lake]": (
        "reference",
        "installs from the package index; the extra's two wheels are in the dev extra too, "
        "and every DuckLake test loads them",
    ),
    "createdb -h db.example.org -U juryflow juryflow": ("tests/pg_server.py", '"createdb"'),
    "export JURYFLOW_DB=ducklake:postgres:dbname=juryflow host=db.example.org user=juryflow": (
        "tests/test_sharded_deployment.py",
        '"JURYFLOW_DB": lake',
    ),
    "export JURYFLOW_DATA_PATH=/mnt/juryflow-lake": (
        "tests/test_sharded_deployment.py",
        '"JURYFLOW_DATA_PATH": str(tmp_path / "lake-data")',
    ),
    "juryflow run --suite nightly-model-a": ("tests/test_lake_runs.py", '"--suite", f"suite-{n}"'),
    "juryflow run --suite nightly-model-b": ("tests/test_lake_runs.py", '"--suite", f"suite-{n}"'),
    "juryflow run DATASET --shard 1/2 --run-id nightly": (
        "tests/test_lake_runs.py",
        '"--shard", f"{i}/3", "--run-id", "nightly"',
    ),
    "juryflow run DATASET --shard 2/2 --run-id nightly": (
        "tests/test_lake_runs.py",
        '"--shard", f"{i}/3", "--run-id", "nightly"',
    ),
    "juryflow finish nightly": ("tests/test_lake_runs.py", '"finish", "nightly"'),
    "prefect worker start --pool juryflow-process --limit 1 --name machine-1 &": (
        "tests/test_sharded_deployment.py",
        '"--limit", "1", "--name", f"machine-{n}"',
    ),
    "prefect worker start --pool juryflow-process --limit 1 --name machine-2 &": (
        "tests/test_sharded_deployment.py",
        '"--limit", "1", "--name", f"machine-{n}"',
    ),
    "prefect deployment run evaluate-sharded/evaluate-sharded --param shards=2 "
    "--param run_id=sample-sharded --watch": (
        "tests/test_sharded_deployment.py",
        '"--param", "shards=2", "--param", "run_id=sample-sharded", "--watch"',
    ),
    "juryflow sql --at-run RUN SELECT status, count(*) AS runs FROM runs GROUP BY status": (
        "tests/test_lake_sql.py",
        '"--at-run"',
    ),
    "juryflow store compact --db ducklake:postgres:dbname=evals host=db.internal --keep-days 7": (
        "tests/test_lake_compact.py",
        '"store", "compact", "--db"',
    ),
    # README "A tour" (issue 41, point 5): the commands that matter, one line each
    "juryflow run": ("tests/test_readme.py", '[JURYFLOW, "run"], env=_env(one, home), cwd=tmp'),
    "juryflow calibrate --name mine": (
        "tests/test_regression_baseline.py",
        '_invoke("calibrate", "--db", db, "--name", "mine")',
    ),
    "juryflow view --open": (
        "tests/test_cli_conveniences.py",
        '[JURYFLOW, "view", "--db", str(db), "--port", "0", "--open"]',
    ),
    "juryflow report -o report.html": ("tests/test_report.py", '["report", "-o", str(out)'),
    "juryflow regression": (
        "tests/test_regression_baseline.py",
        '_invoke("regression", "--db", db)',
    ),
    "juryflow runs": ("tests/test_runs_cli.py", 'invoke("runs", "--db", two_runs.db)'),
    "juryflow show RUN ITEM": ("tests/test_look.py", 'invoke("show", runs.changed, item'),
    "juryflow compare RUN BASELINE": ("tests/test_look.py", '"compare", runs.changed, runs.good'),
    "juryflow runs delete RUN": ("tests/test_runs_delete.py", '["runs", "delete", oldest[:-2]'),
    "juryflow store prune --keep 5": ("tests/test_runs_delete.py", '["store", "prune", "--keep"'),
    "juryflow import FILE --judges COLUMN --label COLUMN": (
        "tests/test_import.py",
        '"--judges",\n        "judges_valid",\n        "--label",',
    ),
    # README "Documentation": the site
    ".venv/bin/mkdocs serve": ("reference", "serves until Ctrl-C; scripts/test.sh builds the site"),
    ".venv/bin/mkdocs build --strict": ("scripts/test.sh", ".venv/bin/mkdocs build --strict"),
    # docs/contributing.md: the command line's reference written again from the code
    ".venv/bin/python scripts/cli_reference.py": (
        "tests/test_docs.py",
        '_script("cli_reference").render()',
    ),
}


def pages() -> list[Path]:
    """README.md, then every page of docs/ written there (not those that link elsewhere)."""
    found = [README]
    if DOCS.is_dir():
        found += sorted(
            page
            for page in DOCS.rglob("*.md")
            if not page.is_symlink() and page.resolve().is_relative_to(DOCS.resolve())
        )
    return found


PAGES = pages()
PAGE_IDS = [str(page.relative_to(REPO)) for page in PAGES]
COMMANDS = [c for page in PAGES for c in readme_commands(page.read_text(encoding="utf-8"), page)]
PYTHON_API_PAGE = DOCS / "reference" / "python-api.md"


def test_the_extractor_finds_multiline_commands_and_transcripts() -> None:
    text = (
        '```bash\n# a comment\njuryflow sql "SELECT 1\n   FROM runs"   # why\n'
        'chromium a \\\n  b\n```\n\n```\n$ juryflow sql "DELETE FROM x"\nerror: no\n```\n'
    )
    found = [(c.line, c.text) for c in readme_commands(text)]
    assert found == [
        (3, "juryflow sql SELECT 1 FROM runs"),
        (5, "chromium a b"),
        (10, "juryflow sql DELETE FROM x"),
    ]


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_command_of_a_page_is_run_somewhere(page: Path) -> None:
    unaccounted = [
        c.where for c in COMMANDS if c.page == page and not c.runs_here and c.text not in ELSEWHERE
    ]
    assert not unaccounted, (
        "commands that nothing runs: run them in tests/test_readme.py or add them to its "
        "ELSEWHERE with the test that runs them:\n" + "\n".join(unaccounted)
    )


def test_every_command_elsewhere_is_shown_and_run_where_it_says() -> None:
    assert len(COMMANDS) > 20
    shown = {c.text for c in COMMANDS}
    stale = sorted(set(ELSEWHERE) - shown)
    assert not stale, f"ELSEWHERE lists commands no page shows any more: {stale}"
    for text, (where, marker) in ELSEWHERE.items():
        if where == "reference":
            assert marker, text
            continue
        content = (REPO / where).read_text(encoding="utf-8")
        assert marker in content, f"{where} does not run `{text}` (no {marker!r} in it)"


def test_every_sql_query_names_one_run() -> None:
    """The issue: queries with no run filter doubled every figure after a second run."""
    queries = [c for c in COMMANDS if c.argv[:2] == ("juryflow", "sql")]
    assert len(queries) >= 10
    for command in queries:
        sql = command.argv[2]
        if not sql.lstrip().upper().startswith("SELECT"):
            continue
        assert re.search(r"\bWHERE run_id = \(SELECT max\(run_id\) FROM \w+\)", sql), (
            f"{command.where}: the query reads every run; scope it to one"
        )


def readme_python_blocks(text: str) -> list[tuple[int, str]]:
    """(first line, code) of each ```python block."""
    blocks: list[tuple[int, str]] = []
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        if re.match(r"^\s*```python\s*$", lines[number]):
            end = next(i for i in range(number + 1, len(lines)) if lines[i].strip() == "```")
            blocks.append((number + 2, "\n".join(lines[number + 1 : end])))
            number = end
        number += 1
    return blocks


def python_api_page() -> Path:
    """The page that shows the Python API: the docs' once they have one, else the README."""
    return PYTHON_API_PAGE if PYTHON_API_PAGE.is_file() else README


def test_only_the_python_api_page_shows_python_blocks() -> None:
    """The one page whose ```python blocks the test below runs; a block elsewhere would be
    shown untested."""
    others = [
        f"{page.relative_to(REPO)}:{line}"
        for page in PAGES
        if page != python_api_page()
        for line, _ in readme_python_blocks(page.read_text(encoding="utf-8"))
    ]
    assert not others, f"```python blocks that no test runs: {others}"


def test_the_python_api_example_runs_as_shown(
    prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = python_api_page()
    blocks = readme_python_blocks(page.read_text(encoding="utf-8"))
    assert blocks, "the docs show the Python API"
    monkeypatch.chdir(tmp_path)  # its store, evals.duckdb, lands here
    namespace: dict[str, object] = {}
    for line, code in blocks:
        exec(compile(code, f"{page.relative_to(REPO)}:{line}", "exec"), namespace)
    run = namespace["run"]
    assert (tmp_path / "evals.duckdb").exists()
    assert namespace["scores"].shape == (20, 3)  # type: ignore[attr-defined]
    assert namespace["union"].run_id != run.run_id  # type: ignore[attr-defined]


def test_the_pages_name_the_commands_that_matter() -> None:
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    named = set(re.findall(r"`juryflow ([a-z][a-z-]*)", text))
    assert {"agreement", "disagreements", "sql", "run"} <= named


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_inline_commands_name_real_subcommands(page: Path) -> None:
    import typer.main
    from typer.core import TyperGroup

    from juryflow.cli import app

    text = page.read_text(encoding="utf-8")
    named = set(re.findall(r"`juryflow ([a-z][a-z-]*)", text))
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    known = set(group.commands)
    assert named <= known, (
        f"{page.relative_to(REPO)} names juryflow commands that do not exist: {named - known}"
    )


# --- running the pages' queries against a real store ------------------------------


def _env(db: Path, home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "JURYFLOW_DB": str(db),
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "COLUMNS": "200",
    }


@dataclass(frozen=True)
class Stores:
    one_run: Path  # what `juryflow run` made
    two_runs: Path  # the same plus an older copy of that run: a second run on the store
    env: dict[str, str]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stores]:
    tmp = tmp_path_factory.mktemp("readme")
    one = tmp / "one.duckdb"
    home = Path(os.environ.get("PREFECT_HOME", str(tmp / "prefect-home")))
    made = subprocess.run(
        [JURYFLOW, "run"], env=_env(one, home), cwd=tmp, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    two = tmp / "two.duckdb"
    shutil.copyfile(one, two)
    with duckdb.connect(str(two)) as con:
        (run_id,) = con.execute("SELECT max(run_id) FROM runs").fetchone() or ("",)
        older = "00000000-000000-" + run_id.rsplit("-", 1)[-1]
        tables = [
            name
            for (name,) in con.execute(
                "SELECT table_name FROM information_schema.columns c JOIN "
                "information_schema.tables t USING (table_schema, table_name) "
                "WHERE column_name = 'run_id' AND table_type = 'BASE TABLE'"
            ).fetchall()
        ]
        for table in tables:
            con.execute(
                f"INSERT INTO {table} SELECT * REPLACE (? AS run_id) FROM {table} WHERE run_id = ?",
                [older, run_id],
            )
    yield Stores(one, two, _env(two, home))


def _rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_the_commands_run_on_a_store_with_two_runs(stores: Stores) -> None:
    """Each command runs as shown on a store holding a second run; each query gives the
    same rows as on the store with one run (an unscoped query would count both).

    In-process through the CLI app (its real code and a real DuckDB file), because a
    subprocess per command costs seconds of imports each; the CSV test below and the
    store fixture run `juryflow` as a subprocess."""
    from typer.testing import CliRunner

    from juryflow.cli import app

    runner = CliRunner()
    # shown in the prose and tables above their outputs rather than in a bash block
    extra = (
        Command(0, ("juryflow", "agreement")),
        Command(0, ("juryflow", "disagreements", "--top", "2")),
    )
    for command in [*(c for c in COMMANDS if c.runs_here), *extra]:
        where = command.where
        result = runner.invoke(app, list(command.argv[1:]), env=stores.env)
        shown = result.output
        # a Python error in the command, not an exit code the command chose
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            where + "\n" + repr(result.exception)
        )
        if command.argv[1] == "sql" and not command.argv[2].lstrip().upper().startswith("SELECT"):
            # the page shows this one refused
            assert result.exit_code == 2 and "refused" in shown, where + "\n" + shown
            continue
        assert result.exit_code == 0, where + "\n" + shown
        if command.argv[1] == "sql":
            sql = command.argv[2]
            # as multisets: a query without ORDER BY may list its rows in any order
            assert sorted(map(repr, _rows(stores.two_runs, sql))) == sorted(
                map(repr, _rows(stores.one_run, sql))
            ), where


def test_the_csv_output_shown_is_what_the_sample_gives(stores: Stores) -> None:
    """The `--format csv` example shows the sample's figures, with LF line ends."""
    (command,) = [c for c in COMMANDS if c.runs_here and "--format" in c.argv]
    result = subprocess.run(
        [JURYFLOW, *command.argv[1:]], env=stores.env, cwd=REPO, capture_output=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(b"\n") and b"\r" not in result.stdout, "CSV lines end with CRLF"
    shown = result.stdout.decode("utf-8").strip()
    assert shown in command.page.read_text(encoding="utf-8"), (
        f"{command.where}: the CSV example differs from the sample's output:\n" + shown
    )
