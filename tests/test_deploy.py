"""prefect.yaml: validated by Prefect's own loader, then `prefect deploy --all` to a real server."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from juryflow.planning.run_request import RunRequest
from tests.conftest import REPO
from tests.prefect_server import running_prefect_server

PREFECT_YAML = REPO / "prefect.yaml"


def _load() -> tuple[list[dict], dict, str]:
    from prefect.cli.deploy._config import _load_deploy_configs_and_actions

    console = Console(record=True, width=200)
    deployments, actions = _load_deploy_configs_and_actions(PREFECT_YAML, console=console)
    return deployments, actions, console.export_text()


def test_prefect_yaml_validates_with_prefects_loader() -> None:
    from prefect.cli.deploy._schedules import _construct_schedules
    from prefect.flows import load_flow_from_entrypoint

    deployments, actions, messages = _load()
    assert "Skipping" not in messages and "error" not in messages.lower(), messages
    by_name = {d["name"]: d for d in deployments}
    nightly = {"evaluate-nightly", "regression-nightly"}
    assert set(by_name) == nightly | {"evaluate-shard", "evaluate-sharded"}
    assert by_name["evaluate-nightly"]["entrypoint"] == "flows/evaluate.py:evaluate"
    assert by_name["regression-nightly"]["entrypoint"] == "flows/regression.py:regression"
    # the sharded ones (README "Many machines"): tests/test_sharded_deployment.py runs them
    assert by_name["evaluate-shard"]["entrypoint"] == "flows/evaluate.py:evaluate"
    assert by_name["evaluate-sharded"]["entrypoint"] == "flows/sharded.py:evaluate_sharded"
    step = actions["pull"][0]["prefect.deployments.steps.set_working_directory"]
    assert step["directory"] == "{{ $PWD }}"
    for deployment in deployments:
        assert deployment["work_pool"]["name"] == "juryflow-process"
        # every parameter is one the flow accepts
        flow = load_flow_from_entrypoint(str(REPO / deployment["entrypoint"]))
        accepted = set(flow.parameters.properties)
        parameters = deployment.get("parameters") or {}
        assert set(parameters) <= accepted, deployment["name"]
        # a run's settings are one request, each a field of RunRequest
        assert set(parameters.get("request") or {}) <= set(RunRequest.model_fields)
        RunRequest.of(**(parameters.get("request") or {}))
        if deployment["name"] not in nightly:
            assert not deployment.get("schedules"), deployment["name"]  # started on demand
            continue
        schedules = _construct_schedules(
            deployment, step_outputs={}, console=Console(), is_interactive=lambda: False
        )
        assert len(schedules) == 1
        assert schedules[0]["schedule"].timezone == "UTC"
        # the paths exist in the checkout
        assert (REPO / parameters["request"]["dataset"]).is_file()
        assert (REPO / parameters["request"]["panel"]).is_file()
    assert by_name["regression-nightly"]["parameters"]["baseline"] == "last"


def test_serve_builds_both_scheduled_deployments() -> None:
    from juryflow.flows.serve import build_deployments

    evaluate_d, regression_d = build_deployments(
        dataset="data.jsonl", evaluate_cron="0 3 * * *", timezone="Europe/Paris"
    )
    assert (evaluate_d.name, regression_d.name) == ("evaluate-serve", "regression-serve")
    assert evaluate_d.parameters == {"request": {"dataset": "data.jsonl"}}
    assert regression_d.parameters == {"request": {"dataset": "data.jsonl"}, "baseline": "last"}
    schedule = evaluate_d.schedules[0].schedule
    assert (schedule.cron, schedule.timezone) == ("0 3 * * *", "Europe/Paris")


def test_serve_and_deploy_never_share_a_deployment_name() -> None:
    """The crash: `juryflow serve` after `prefect deploy --all` re-registered
    evaluate-nightly / regression-nightly, Prefect dropped their pull steps but kept their
    empty path, and the next run looked for its code in '<repo>/None'."""
    from juryflow.flows.serve import SERVED, build_deployments

    deployments, _, _ = _load()
    deployed = {f"{d['entrypoint'].rsplit(':', 1)[1]}/{d['name']}" for d in deployments}
    served = {f"{d.flow_name}/{d.name}" for d in build_deployments()}
    assert served == set(SERVED)
    assert deployed and not deployed & served


def test_prefect_yaml_suite_is_the_cli_default(tmp_path: Path) -> None:
    """prefect.yaml's suite is the one `juryflow run/regression` gives the same dataset and
    panel without --suite, so a scheduled regression finds the CLI's runs as baselines."""
    from juryflow.planning.run_setup import plan_run

    deployments, _, _ = _load()
    for deployment in deployments:
        parameters = (deployment.get("parameters") or {}).get("request") or {}
        if "suite" not in parameters:  # the sharded ones take no suite of their own
            continue
        plan = plan_run(
            RunRequest(
                dataset=str(REPO / parameters["dataset"]),
                panel=str(REPO / parameters["panel"]),
                db=str(tmp_path / f"{deployment['name']}.duckdb"),
            )
        )
        run = plan.store.get_run(plan.run_id)
        assert run is not None
        assert run.suite == parameters["suite"], deployment["name"]


AUTOMATION = REPO / "examples" / "automation.failed-regression.yaml"


def _automation(block_id: str) -> dict:
    import yaml

    text = AUTOMATION.read_text(encoding="utf-8")
    assert "BLOCK_ID" in text  # the placeholder the README tells users to replace
    data = yaml.safe_load(text.replace("BLOCK_ID", block_id))
    assert isinstance(data, dict)
    return data


def test_the_example_automation_is_a_valid_prefect_automation() -> None:
    import uuid

    from prefect.events.schemas.automations import AutomationCore, EventTrigger

    automation = AutomationCore.model_validate(_automation(str(uuid.uuid4())))
    trigger = automation.trigger
    assert isinstance(trigger, EventTrigger)
    assert trigger.expect == {"prefect.flow-run.Failed"}
    # it fires for the flow named in flows/regression.py, not for any failed flow
    from juryflow.flows.regression import regression

    related = trigger.match_related
    assert not isinstance(related, list)
    assert related.root["prefect.resource.name"] == regression.name
    assert related.root["prefect.resource.role"] == "flow"
    assert [action.type for action in automation.actions] == ["send-notification"]


@pytest.fixture
def prefect_server(tmp_path: Path) -> Iterator[dict[str, str]]:
    with running_prefect_server(tmp_path) as env:
        yield env


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), env=env, cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.slow
def test_deploy_all_to_a_local_server(prefect_server: dict[str, str]) -> None:
    env = prefect_server
    prefect = str(Path(sys.executable).with_name("prefect"))
    pool = _run(env, prefect, "work-pool", "create", "juryflow-process", "--type", "process")
    assert pool.returncode == 0, pool.stdout + pool.stderr
    deploy = _run(env, prefect, "--no-prompt", "deploy", "--all")
    output = deploy.stdout + deploy.stderr
    assert deploy.returncode == 0, output
    for name in ("evaluate/evaluate-nightly", "regression/regression-nightly"):
        assert f"Deployment '{name}' successfully created" in " ".join(output.split())
        inspect = _run(env, prefect, "deployment", "inspect", name)
        assert inspect.returncode == 0, inspect.stdout + inspect.stderr
        shown = inspect.stdout
        assert "juryflow-process" in shown and "'timezone': 'UTC'" in shown
        assert f"'directory': '{REPO}'" in shown
    assert (
        "'cron': '30 2 * * *'"
        in _run(env, prefect, "deployment", "inspect", "regression/regression-nightly").stdout
    )


_SERVE_AFTER_DEPLOY = """
from juryflow.flows.serve import build_deployments, check_no_collision
check_no_collision()
for deployment in build_deployments():
    deployment.apply()
print("applied")
"""

_ALERT_BLOCK = """
from prefect.blocks.notifications import CustomWebhookNotificationBlock
block = CustomWebhookNotificationBlock(name="juryflow", url="http://127.0.0.1:9/hook")
print(block.save("juryflow-alert"))
"""


@pytest.mark.slow
def test_serve_after_deploy_leaves_the_worker_deployments_intact(
    prefect_server: dict[str, str], tmp_path: Path
) -> None:
    """`prefect deploy --all`, then what `juryflow serve` registers: both sets coexist, the
    worker's deployments keep their pull steps (no '<repo>/None'), and a deployment taking
    a served name for a work pool makes `juryflow serve` refuse in one line."""
    env = prefect_server
    prefect = str(Path(sys.executable).with_name("prefect"))
    pool = _run(env, prefect, "work-pool", "create", "juryflow-process", "--type", "process")
    assert pool.returncode == 0, pool.stdout + pool.stderr
    deploy = _run(env, prefect, "--no-prompt", "deploy", "--all")
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    served = _run(env, sys.executable, "-c", _SERVE_AFTER_DEPLOY)
    assert served.returncode == 0 and "applied" in served.stdout, served.stdout + served.stderr
    nightly = _run(env, prefect, "deployment", "inspect", "regression/regression-nightly").stdout
    assert "juryflow-process" in nightly and f"'directory': '{REPO}'" in nightly
    serve = _run(env, prefect, "deployment", "inspect", "regression/regression-serve").stdout
    # served from the repository (the runner's working directory), never a None path
    assert "'path': '.'" in serve and "'work_pool_name': None" in serve, serve

    # the example automation is accepted by the server once its block id is filled in
    block = _run(env, sys.executable, "-c", _ALERT_BLOCK)
    assert block.returncode == 0, block.stdout + block.stderr
    automation = tmp_path / "automation.yaml"
    automation.write_text(
        AUTOMATION.read_text(encoding="utf-8").replace("BLOCK_ID", block.stdout.strip()),
        encoding="utf-8",
    )
    created = _run(env, prefect, "automation", "create", "--from-file", str(automation))
    assert created.returncode == 0, created.stdout + created.stderr
    assert "juryflow-regression-failed" in created.stdout

    # a worker deployment under a served name: serve refuses instead of breaking it
    taken = _run(
        env, prefect, "--no-prompt", "deploy", "flows/evaluate.py:evaluate",
        "--name", "evaluate-serve", "--pool", "juryflow-process",
    )  # fmt: skip
    assert taken.returncode == 0, taken.stdout + taken.stderr
    juryflow = str(Path(sys.executable).with_name("juryflow"))
    refused = _run(env, juryflow, "serve")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "evaluate/evaluate-serve" in refused.stderr and "prefect deploy" in refused.stderr
    assert "Traceback" not in refused.stdout + refused.stderr
