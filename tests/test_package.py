"""The wheel: one top-level package, `juryflow`, that runs on its own, away from the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import duckdb
import pytest

from tests.conftest import REPO

# The wheel is built and installed once (~30 s), in the default run: no other test installs
# juryflow as a user does. Only the plain editable install is `slow` (CI's own install is one).

# juryflow/ (the face) and the folder of each layer below it, each `juryflow.<folder>`
LAYER_FOLDERS = ("juryflow", "flows", "analysis", "planning", "standin", "storage", "judges")
LAYER_FOLDERS += ("prompts", "maths")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
    )
    (found,) = out.glob("juryflow-*.whl")
    return found


def test_the_wheel_installs_only_juryflow(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"juryflow", next(t for t in tops if t.endswith(".dist-info"))}
    for needed in (
        "juryflow/__init__.py",
        "juryflow/__main__.py",
        "juryflow/py.typed",
        "juryflow/cli/commands.py",
        "juryflow/viewer/static/viewer.js",
        "juryflow/pages/templates/report.html",
        "juryflow/pages/templates/_report.css",
        "juryflow/flows/evaluate.py",
        "juryflow/flows/runtime/interrupts.py",
        "juryflow/analysis/agreement_report.py",
        "juryflow/planning/run_setup.py",
        "juryflow/standin/server.py",
        "juryflow/maths/consensus.py",
        "juryflow/judges/providers/anthropic.py",
        "juryflow/judges/detectors/__init__.py",
        "juryflow/storage/store/__init__.py",
        "juryflow/storage/store/writes.py",
        "juryflow/storage/lake/attach.py",
        "juryflow/storage/reads/run_queries.py",
        "juryflow/prompts/catalog.yaml",
        "juryflow/prompts/templates/data2txt_spans.v1.txt",
        "juryflow/examples/ragtruth_data2txt_sample.jsonl",
        "juryflow/examples/panel.offline.yaml",
    ):
        assert needed in names, needed
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "juryflow = juryflow.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_installed_wheel_runs_its_bundled_sample_outside_the_checkout(
    wheel: Path, tmp_path: Path
) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), wheel],
        check=True,
        capture_output=True,
    )
    # the wheel's copy comes first on the path, ahead of the checkout's editable install
    env = {**os.environ, "PYTHONPATH": str(target), "PREFECT_HOME": str(tmp_path / "ph")}
    where = subprocess.run(
        [sys.executable, "-c", "import juryflow, juryflow.api; print(juryflow.api.__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip().startswith(str(target))
    dataset, items = _run_three_items([sys.executable, "-m", "juryflow"], env, tmp_path)
    assert items == 3
    # the sample the wheel bundles, not the checkout's examples/
    assert dataset == str(target / "juryflow" / "examples" / "ragtruth_data2txt_sample.jsonl")


def _run_three_items(juryflow: list[str], env: dict[str, str], where: Path) -> tuple[str, int]:
    """`juryflow run --limit 3` in ``where``: the dataset the run read and its item count."""
    db = where / "three.duckdb"
    run = subprocess.run(
        [*juryflow, "run", "--limit", "3", "--db", str(db)],
        env=env,
        cwd=where,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        (dataset,) = con.execute("SELECT dataset FROM runs").fetchone() or ("",)
        (items,) = con.execute("SELECT count(*) FROM items").fetchone() or (0,)
    return str(dataset), int(items)


def _third_party_imports() -> set[str]:
    import ast

    names: set[str] = set()
    for folder in LAYER_FOLDERS:
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"juryflow"}


def test_runtime_dependencies_are_what_runtime_code_imports() -> None:
    import re
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    def dist(requirement: str) -> str:
        return re.split(r"[<>=!\[ ;]", requirement, maxsplit=1)[0].lower().replace("-", "_")

    declared = {dist(r) for r in project["dependencies"]}
    # the SDKs' [aiohttp] extra brings aiohttp, whose errors the providers recognise
    declared |= {"aiohttp"} if any("[aiohttp]" in r for r in project["dependencies"]) else set()
    optional = project["optional-dependencies"]
    extras = {dist(r) for name in ("pandas", "dask") for r in optional[name]}
    import_names = {"pyyaml": "yaml", "python_dotenv": "dotenv", "scikit_learn": "sklearn"}
    declared = {import_names.get(d, d) for d in declared}
    imported = _third_party_imports()
    # fastapi is pinned only to keep prefect's server importable (see pyproject.toml).
    assert declared - imported == {"fastapi"}
    assert imported - declared - extras == set()


@pytest.mark.slow
def test_a_plain_editable_install_runs_the_bundled_sample(tmp_path: Path) -> None:
    """`pip install -e .` without setuptools' strict mode: the install most contributors type."""
    import site
    import venv

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # the dependencies come from this test's environment (a path line, not its .pth files:
    # this environment's own editable juryflow stays out); juryflow itself is installed anew
    (purelib,) = (
        Path(p)
        for p in subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    )
    (purelib / "deps.pth").write_text(site.getsitepackages()[0] + "\n", encoding="utf-8")
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "-e", str(REPO)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "ph")}
    env.pop("PYTHONPATH", None)
    dataset, items = _run_three_items([str(env_dir / "bin" / "juryflow")], env, tmp_path)
    assert items == 3
    assert dataset == str(REPO / "examples" / "ragtruth_data2txt_sample.jsonl")


def test_every_subpackage_of_the_tree_ships_in_the_wheel() -> None:
    """setuptools installs only the packages pyproject.toml lists: a new folder left out of
    the list imports in the checkout and fails only once installed."""
    import tomllib

    setup = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    listed = set(setup["setuptools"]["packages"])
    found = set()
    for name, folder in setup["setuptools"]["package-dir"].items():
        root = REPO / folder
        for init in root.rglob("__init__.py"):
            parts = init.parent.relative_to(root).parts
            found.add(".".join((name, *parts)))
    assert found - listed == set(), "add these to [tool.setuptools] packages"
