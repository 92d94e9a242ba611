"""prefect.yaml: validated by Prefect's own loader, then `prefect deploy --all` to a real server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from rich.console import Console

from tests.conftest import REPO

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
    assert set(by_name) == {"evaluate-nightly", "regression-nightly"}
    assert by_name["evaluate-nightly"]["entrypoint"] == "flows/evaluate.py:evaluate"
    assert by_name["regression-nightly"]["entrypoint"] == "flows/regression.py:regression"
    step = actions["pull"][0]["prefect.deployments.steps.set_working_directory"]
    assert step["directory"] == "{{ $PWD }}"
    for deployment in deployments:
        assert deployment["work_pool"]["name"] == "juryflow-process"
        schedules = _construct_schedules(
            deployment, step_outputs={}, console=Console(), is_interactive=lambda: False
        )
        assert len(schedules) == 1
        assert schedules[0]["schedule"].timezone == "UTC"
        # every parameter is one the flow accepts, and the paths exist in the checkout
        flow = load_flow_from_entrypoint(str(REPO / deployment["entrypoint"]))
        accepted = set(flow.parameters.properties)
        assert set(deployment["parameters"]) <= accepted, deployment["name"]
        assert (REPO / deployment["parameters"]["dataset"]).is_file()
        assert (REPO / deployment["parameters"]["panel"]).is_file()
    assert by_name["regression-nightly"]["parameters"]["baseline"] == "last"


def test_serve_builds_both_scheduled_deployments() -> None:
    from flows.serve import build_deployments

    evaluate_d, regression_d = build_deployments(
        dataset="data.jsonl", evaluate_cron="0 3 * * *", timezone="Europe/Paris"
    )
    assert (evaluate_d.name, regression_d.name) == ("evaluate-nightly", "regression-nightly")
    assert evaluate_d.parameters == {"dataset": "data.jsonl"}
    assert regression_d.parameters == {"dataset": "data.jsonl", "baseline": "last"}
    schedule = evaluate_d.schedules[0].schedule
    assert (schedule.cron, schedule.timezone) == ("0 3 * * *", "Europe/Paris")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def prefect_server(tmp_path: Path) -> dict[str, str]:
    port = _free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_UI_ENABLED": "false",
        "PWD": str(REPO),
    }
    prefect = str(Path(sys.executable).with_name("prefect"))
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    "prefect server did not start:\n"
                    + (tmp_path / "server.log").read_text()[-3000:]
                )
            time.sleep(0.5)
        yield env
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        log.close()


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
