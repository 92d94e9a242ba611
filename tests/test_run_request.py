"""Issue 41, point 1: a run's settings are one record, RunRequest, built once by the command
line, the API, `regression` and the deployments, checked once, and passed to the flow whole.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import typer

from juryflow.cli.commands import app
from juryflow.planning.run_request import RESUME_KEEPS, RunRequest, RunSetupError

REPO = Path(__file__).resolve().parents[1]
PACKAGE_FOLDERS = ("juryflow", "flows", "judges", "planning", "storage", "analysis", "maths",
                   "prompts", "standin")  # fmt: skip
COMMAND_BEHAVIOUR = {"dry_run", "verbose"}
"""Options of `juryflow run` that say how the command behaves, not what the run is."""
CLI_NAMES = {"no_cache": "use_cache"}


def _functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _run_command() -> typer.models.CommandInfo:
    return next(c for c in app.registered_commands if c.callback and c.callback.__name__ == "run")


def test_the_run_command_is_its_options_and_one_call() -> None:
    (run,) = [f for f in _functions(REPO / "juryflow/cli/commands.py") if f.name == "run"]
    assert run.end_lineno is not None and run.end_lineno - run.lineno + 1 <= 60


def test_every_option_of_run_is_a_field_of_the_request_and_every_field_an_option() -> None:
    callback = _run_command().callback
    assert callback is not None
    options = set(inspect.signature(callback).parameters) - {"ctx"} - COMMAND_BEHAVIOUR
    fields = {CLI_NAMES.get(name, name) for name in options}
    assert fields == set(RunRequest.model_fields)


def test_the_flow_and_the_api_take_the_request_and_no_setting_by_name() -> None:
    from juryflow import api
    from juryflow.flows.evaluate import evaluate
    from juryflow.flows.regression import regression
    from juryflow.planning.dry_run import estimate_run
    from juryflow.planning.run_setup import plan_run, prepare_run

    settings = set(RunRequest.model_fields)
    for function in (evaluate.fn, regression.fn, plan_run, prepare_run, estimate_run):
        named = set(inspect.signature(function).parameters) & settings
        assert not named, (function.__name__, named)
    # The API passes every field through: one it never named before is accepted as is.
    for function in (api.run, api.estimate):
        kinds = {p.kind for p in inspect.signature(function).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD in kinds


def test_the_quorum_reaches_the_consensus_through_two_signatures_at_most() -> None:
    """From `juryflow run --quorum` to the consensus, the setting travels in records
    (RunRequest, then RunPlan); the signatures that take it by name after the command line
    are the consensus's own two (item_consensus, resolve_quorum), and early stopping's
    (early_stop_plan, then the maths it calls) on its side branch."""
    on_the_way = [
        REPO / "juryflow/cli/run_command.py",
        REPO / "juryflow/runner.py",
        *(REPO / "planning").glob("*.py"),
        REPO / "flows/evaluate.py",
        REPO / "flows/chunks.py",
        REPO / "flows/tasks.py",
        REPO / "flows/workers.py",
    ]
    taking = {
        f"{path.stem}.{function.name}"
        for path in on_the_way
        for function in _functions(path)
        if "quorum" in {a.arg for a in function.args.args + function.args.kwonlyargs}
    }
    assert taking == {"early_stop_plan.early_stop_plan"}


def test_no_function_over_a_hundred_lines_without_saying_why() -> None:
    long = []
    for folder in PACKAGE_FOLDERS:
        for path in (REPO / folder).rglob("*.py"):
            for function in _functions(path):
                assert function.end_lineno is not None
                if function.end_lineno - function.lineno + 1 <= 100:
                    continue
                if "Over 100 lines:" not in (ast.get_docstring(function) or ""):
                    long.append(f"{path.relative_to(REPO)}:{function.name}")
    assert long == []


@pytest.mark.parametrize(
    ("settings", "line"),
    [
        ({"chunk_size": 0}, "--chunk-size 0: give at least 1 item per task"),
        ({"limit": 3, "sample": 2}, "give --limit N (the first N items) or --sample N, not both"),
        ({"workers": "many"}, "--workers takes a number of processes (1-64) or 'auto'"),
        ({"mapping": ["response"]}, "--map 'response': expected VAR=COLUMN"),
        ({"audit_fraction": 1.5}, "--audit-fraction 1.5 is not a share"),
        ({"seed": "x"}, "--seed: Input should be a valid integer"),
        ({"qourum": 2}, "unknown run setting 'qourum' (did you mean 'quorum'?)"),
        ({"resume": "r1", "quorum": 2, "batch": True}, "drop --quorum, --batch"),
        ({"run_id": "r1"}, "--run-id names a sharded run"),
    ],
)
def test_a_request_that_cannot_run_is_one_line_naming_the_fix(
    settings: dict[str, object], line: str
) -> None:
    with pytest.raises(RunSetupError) as refused:
        RunRequest.of(**settings)
    assert line in str(refused.value) and "\n" not in str(refused.value)


def test_the_request_keeps_what_was_given_for_a_resume_to_compare() -> None:
    request = RunRequest.of(resume="r1", chunk_size=20, mapping=["a=b"])
    assert request.given == {"resume", "chunk_size", "mapping"}
    assert request.mapping == {"a": "b"}
    assert set(RESUME_KEEPS) <= set(RunRequest.model_fields)


def test_a_catalog_password_never_stays_in_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the flow receives is stored in Prefect's database as its parameters."""
    from juryflow.storage.lake.attach import SEALED_PASSWORD_ENV

    monkeypatch.delenv(SEALED_PASSWORD_ENV, raising=False)
    request = RunRequest.of(db="ducklake:postgres:dbname=x password=s3cret host=h")
    assert "s3cret" not in request.model_dump_json()
    assert f"${{{SEALED_PASSWORD_ENV}}}" in (request.db or "")


def test_the_request_travels_as_a_deployment_parameter_and_back() -> None:
    """Prefect stores a deployment's parameters as JSON and validates them into the flow's
    parameter: the same request comes back."""
    from prefect.utilities.callables import parameter_schema

    from juryflow.flows.evaluate import evaluate

    request = RunRequest.of(dataset="d.jsonl", batch=True, mapping={"a": "b"}, workers="auto")
    assert RunRequest.model_validate_json(request.model_dump_json()) == request
    schema = parameter_schema(evaluate.fn)
    assert "request" in schema.properties
