"""`juryflow serve`: the nightly evaluate and regression deployments on one machine.

``prefect.serve`` registers both deployments with their cron schedules and runs their flow
runs in this process: no work pool, no worker. It needs a Prefect API: a server started
with ``prefect server start`` in another terminal (``PREFECT_API_URL`` pointing at it), so
that the schedules and runs show in its UI.

The served deployments are named ``*-serve``, never like ``prefect.yaml``'s ``*-nightly``:
serving over a deployment made by ``prefect deploy`` would keep its pull steps' absence
but not its path (Prefect updates only what ``serve`` sets), and its next run would crash
looking for the flow code in ``<cwd>/None``. A same-named deployment that belongs to a
work pool is refused with a message instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

DEFAULT_EVALUATE_CRON = "0 2 * * *"
DEFAULT_REGRESSION_CRON = "30 2 * * *"
EVALUATE_NAME = "evaluate-serve"
REGRESSION_NAME = "regression-serve"
SERVED = (f"evaluate/{EVALUATE_NAME}", f"regression/{REGRESSION_NAME}")


class ServeError(RuntimeError):
    """A served deployment would overwrite one made by ``prefect deploy``."""


def build_deployments(
    *,
    dataset: str | None = None,
    panel: str | None = None,
    db: str | None = None,
    suite: str | None = None,
    baseline: str = "last",
    evaluate_cron: str = DEFAULT_EVALUATE_CRON,
    regression_cron: str = DEFAULT_REGRESSION_CRON,
    timezone: str = "UTC",
    thresholds: dict[str, Any] | None = None,
) -> list[Any]:
    """The two runner deployments, ready for ``prefect.serve``."""
    from prefect.schedules import Cron

    from juryflow.flows.evaluate import evaluate
    from juryflow.flows.regression import regression

    settings: dict[str, Any] = {"dataset": dataset, "panel": panel, "db": db, "suite": suite}
    # One request, as the flows take it; its fields are what `juryflow run` accepts.
    given = {k: v for k, v in settings.items() if v is not None}
    common = {"request": given} if given else {}
    evaluate_deployment = evaluate.to_deployment(
        name=EVALUATE_NAME,
        schedules=[Cron(evaluate_cron, timezone=timezone)],
        parameters=common,
        description="Judge the suite with the panel every night (served by `juryflow serve`).",
        tags=["juryflow", "serve"],
    )
    regression_deployment = regression.to_deployment(
        name=REGRESSION_NAME,
        schedules=[Cron(regression_cron, timezone=timezone)],
        parameters={**common, "baseline": baseline, **(thresholds or {})},
        description="Judge the suite again and fail when it regressed against the baseline.",
        tags=["juryflow", "serve"],
    )
    return [evaluate_deployment, regression_deployment]


def deployed_elsewhere(names: Iterable[str] = SERVED) -> list[str]:
    """Of ``names`` (``flow/deployment``), those the API holds for a work pool or with
    pull steps: deployments made by ``prefect deploy`` that serving would break."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    taken = []
    with get_client(sync_client=True) as client:
        for name in names:
            try:
                existing = client.read_deployment_by_name(name)
            except ObjectNotFound:
                continue
            if existing.work_pool_name or existing.pull_steps:
                taken.append(f"{name} (work pool {existing.work_pool_name or 'none'})")
    return taken


def check_no_collision(names: Iterable[str] = SERVED) -> None:
    """Raise :class:`ServeError` naming the fix when serving would overwrite a deployment."""
    import httpx

    try:
        taken = deployed_elsewhere(names)
    except httpx.HTTPError as error:
        raise ServeError(
            f"cannot reach the Prefect API ({error}); start `prefect server start` and set "
            "PREFECT_API_URL=http://127.0.0.1:4200/api"
        ) from None
    if taken:
        raise ServeError(
            f"deployment {', '.join(taken)} was created by `prefect deploy` for a worker; "
            "serving it from here would break its runs. Delete it first "
            "(`prefect deployment delete NAME`) or keep using the worker"
        )


def serve_nightly(**options: Any) -> None:
    """Serve both deployments until interrupted (Ctrl-C)."""
    from prefect import serve

    check_no_collision()
    serve(*build_deployments(**options))
