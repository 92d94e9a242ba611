"""The house: one folder per layer, each the subpackage of its name, layers kept by
import-linter contracts (ARCHITECTURE.md), folders and modules a reader can take in."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PACKAGE_DIRS: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]
LAYER_FOLDERS = sorted(folder for name, folder in PACKAGE_DIRS.items() if name != "juryflow")


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_layer_folder_is_the_subpackage_of_its_name() -> None:
    for name, folder in PACKAGE_DIRS.items():
        assert name == "juryflow" or name == f"juryflow.{folder}", (name, folder)
        link = REPO / "juryflow" / folder
        if name != "juryflow":
            # the checkout imports as the wheel installs
            assert link.is_symlink() and os.readlink(link) == f"../{folder}", link


def test_the_layer_contracts_hold() -> None:
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


LAYERS, NO_IO, STAND_IN = (
    "Layers of ARCHITECTURE.md",
    "Maths does no I/O",
    "Only the command line starts the stand-in",
)


@pytest.mark.parametrize(
    ("module", "imported", "contract"),
    [
        ("maths/gold.py", "juryflow.storage.store", LAYERS),
        ("storage/views.py", "juryflow.flows.tasks", LAYERS),
        ("judges/parsing.py", "juryflow.analysis.agreement_report", LAYERS),
        ("maths/reducers.py", "duckdb", NO_IO),
        ("juryflow/viewer/state.py", "juryflow.standin.server", STAND_IN),
    ],
)
def test_an_import_against_a_layer_breaks_its_contract(
    tmp_path: Path, module: str, imported: str, contract: str
) -> None:
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy2(REPO / "pyproject.toml", copy / "pyproject.toml")
    for folder in ["juryflow", *LAYER_FOLDERS]:
        shutil.copytree(
            REPO / folder,
            copy / folder,
            symlinks=True,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    target = copy / module
    target.write_text(
        target.read_text(encoding="utf-8") + f"\nimport {imported}  # noqa: E402\n",
        encoding="utf-8",
    )
    done = _lint_imports(copy)
    assert done.returncode == 1, done.stdout + done.stderr
    broken = [line for line in done.stdout.splitlines() if line.rstrip().endswith("BROKEN")]
    assert any(line.startswith(contract) for line in broken), done.stdout


def _python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.py"))


def _code_folders() -> list[Path]:
    roots = [REPO / "juryflow", *(REPO / f for f in LAYER_FOLDERS if f != "examples")]
    found: list[Path] = []
    for root in roots:
        for path, dirs, _files in os.walk(root):  # not into the links of juryflow/
            dirs[:] = [d for d in dirs if d != "__pycache__" and not Path(path, d).is_symlink()]
            found.append(Path(path))
    return found


def test_no_folder_holds_more_than_fifteen_modules_flat() -> None:
    crowded = {
        str(folder.relative_to(REPO)): len(modules)
        for folder in _code_folders()
        if len(modules := [p for p in _python_files(folder) if p.name != "__init__.py"]) > 15
    }
    assert not crowded, crowded


def test_long_modules_of_the_face_and_the_flows_say_why() -> None:
    """Over ~500 lines a module of the face or the flows opens with its reason."""
    unexplained = []
    for folder in _code_folders():
        relative = folder.relative_to(REPO)
        if relative.parts[0] not in ("juryflow", "flows"):
            continue
        for path in _python_files(folder):
            text = path.read_text(encoding="utf-8")
            if text.count("\n") <= 520:
                continue
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "One module because" not in doc:
                unexplained.append(f"{path.relative_to(REPO)}: {text.count(chr(10))} lines")
    assert not unexplained, unexplained


def import_circles(package: str = "juryflow") -> list[list[str]]:
    """Every set of modules that import each other round in a circle (strongly connected
    components of more than one module), lazy and type-checking imports included: a circle
    is a knot a reader must untie, wherever its imports sit."""
    import grimp

    graph = grimp.build_graph(package)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(start: str) -> None:
        # Tarjan's algorithm, iterative: the package's import chains run deep.
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                circle = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    circle.append(member)
                    if member == module:
                        break
                if len(circle) > 1:
                    circles.append(sorted(circle))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return circles


def test_no_module_imports_itself_round_a_circle() -> None:
    """Issue 41, point 2: the last circle went when the stand-in's batch routes got a seam
    of their own (:mod:`juryflow.standin.model`, :mod:`juryflow.standin.http_wire` and the
    ``ServerState`` protocol) instead of the server's private names."""
    assert import_circles() == []
