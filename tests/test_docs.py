"""The documentation site's reference pages say what the code does.

- docs/reference/cli.md is what scripts/cli_reference.py writes from the command line
  itself, so it cannot drift: a changed command fails here until the page is written again;
- docs/reference/python-api.md renders every name ``juryflow`` exports, from its docstring;
- docs/reference/panel-keys.md lists every key the panel schema takes, and its example loads.

(tests/test_readme.py runs the pages' commands; scripts/test.sh builds the site with
``mkdocs build --strict``, which fails on a broken link or a page missing from the nav.)
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.conftest import REPO

DOCS = REPO / "docs"
CLI_PAGE = DOCS / "reference" / "cli.md"


def _script(name: str) -> ModuleType:
    path = REPO / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"scripts_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commands(command: Any, path: str) -> list[tuple[str, Any]]:
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        if not sub.hidden:
            found += _commands(sub, f"{path} {name}")
    return found


def test_the_cli_reference_is_what_the_command_line_says() -> None:
    written = _script("cli_reference").render()
    assert CLI_PAGE.read_text(encoding="utf-8") == written, (
        "docs/reference/cli.md differs from the command line: run "
        ".venv/bin/python scripts/cli_reference.py and commit the page"
    )


def test_the_cli_reference_has_every_command_and_option() -> None:
    import typer.main

    from juryflow.cli import app

    page = CLI_PAGE.read_text(encoding="utf-8")
    every = _commands(typer.main.get_command(app), "juryflow")
    assert len(every) > 20
    for path, command in every:
        heading = f"\n## `{path}`\n"
        assert heading in page, f"no section for {path}"
        body = page.split(heading, 1)[1].split("\n## ", 1)[0]
        assert f"Usage: {path} " in body, path
        for param in command.params:
            for name in [*param.opts, *param.secondary_opts]:
                if name != "--help" and param.param_type_name == "option":
                    assert name in body, f"{path}: {name} missing from its section"


def test_the_cli_reference_shows_help_as_written() -> None:
    """Markdown in the help is escaped, backticks kept: the page shows what --help does."""
    markdown = _script("cli_reference").markdown
    assert markdown("a *b* `c|*d*` <e> x_y [f]") == ("a \\*b\\* `c|*d*` &lt;e&gt; x\\_y \\[f\\]")
    page = CLI_PAGE.read_text(encoding="utf-8")
    # Rich markup read as --help shows it: `\[start, end]` in the source is `[start, end]`
    assert "a list of \\[start, end\\] character offsets" in page
    assert "`--dialect <openai|ollama|vllm|llamacpp>`" in page


def test_every_docs_page_is_in_the_nav() -> None:
    """mkdocs.yml lists every page (the strict build warns otherwise; this says which)."""
    import yaml

    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))

    def listed(entries: Any) -> set[str]:
        if isinstance(entries, str):
            return {entries}
        if isinstance(entries, list):
            return set().union(*(listed(e) for e in entries))
        if isinstance(entries, dict):
            return set().union(*(listed(v) for v in entries.values()))
        return set()

    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == listed(config["nav"]), (
        f"not in the nav: {sorted(pages - listed(config['nav']))}; "
        f"in the nav, no page: {sorted(listed(config['nav']) - pages)}"
    )


def test_no_page_is_left_without_a_title() -> None:
    for page in DOCS.rglob("*.md"):
        first = Path(page).read_text(encoding="utf-8").lstrip().splitlines()[0]
        assert first.startswith("# "), f"{page.relative_to(REPO)} starts with {first!r}"


def test_the_python_api_page_documents_every_exported_name() -> None:
    """docs/reference/python-api.md renders each name of ``juryflow.__all__`` from its
    docstring (mkdocstrings), from the module it lives in."""
    import juryflow

    page = (DOCS / "reference" / "python-api.md").read_text(encoding="utf-8")
    documented = dict(
        line.removeprefix("::: ").strip().rsplit(".", 1)[::-1]
        for line in page.splitlines()
        if line.startswith("::: ")
    )
    exported = {name for name in juryflow.__all__ if name != "__version__"}
    assert set(documented) == exported
    for name, home in documented.items():
        assert getattr(juryflow, name).__module__ == home, name


def _section(page: str, heading: str) -> str:
    return page.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_panel_keys_page_has_every_key_the_panel_file_takes() -> None:
    """docs/reference/panel-keys.md lists every key of the panel schema (judges/panel.py),
    in the table of its level, and every offline detector."""
    from juryflow.judges.detectors.registry import detector_names
    from juryflow.judges.panel import JudgeSpec, PanelSpec
    from juryflow.judges.providers.price import Price

    page = (DOCS / "reference" / "panel-keys.md").read_text(encoding="utf-8")
    for heading, model, internal in (
        ("The panel", PanelSpec, set()),
        ("A judge", JudgeSpec, {"prompt_text"}),  # a prompt file's text, never in a file
        ("Prices", Price, set()),
    ):
        rows = set(re.findall(r"^\| `(\w+)` \|", _section(page, heading), flags=re.M))
        assert rows == set(model.model_fields) - internal, heading
    judge = _section(page, "A judge")
    for name in detector_names():
        assert f"`{name}`" in judge, f"detector {name} missing"


def test_the_panel_keys_page_example_is_a_panel_that_loads(tmp_path: Path) -> None:
    from juryflow.judges.panel import load_panel

    page = (DOCS / "reference" / "panel-keys.md").read_text(encoding="utf-8")
    example = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "panel.yaml").write_text(example, encoding="utf-8")
    panel = load_panel(tmp_path / "panel.yaml")
    assert [j.id for j in panel.judges] == ["claude", "llama", "numbers"]


def test_every_option_of_the_command_line_says_what_it_does() -> None:
    """Issue 43: `run --verbose` had no help text. Read off the reference the command line
    writes: an option row with an empty description fails here."""
    rows = [
        line
        for line in (REPO / "docs" / "reference" / "cli.md").read_text("utf-8").splitlines()
        if line.startswith("| `-")
    ]
    assert rows
    bare = [row for row in rows if not row.split("|")[2].strip()]
    assert bare == []
