"""`juryflow serve`: the nightly evaluate and regression deployments on one machine.

``prefect.serve`` registers both deployments with their cron schedules and runs their flow
runs in this process: no work pool, no worker. It needs a Prefect API: a server started
with ``prefect server start`` in another terminal (``PREFECT_API_URL`` pointing at it), so
that the schedules and runs show in its UI.
"""

from __future__ import annotations

from typing import Any

DEFAULT_EVALUATE_CRON = "0 2 * * *"
DEFAULT_REGRESSION_CRON = "30 2 * * *"


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

    from flows.evaluate import evaluate
    from flows.regression import regression

    common: dict[str, Any] = {"dataset": dataset, "panel": panel, "db": db, "suite": suite}
    common = {k: v for k, v in common.items() if v is not None}
    evaluate_deployment = evaluate.to_deployment(
        name="evaluate-nightly",
        schedules=[Cron(evaluate_cron, timezone=timezone)],
        parameters=common,
        description="Judge the suite with the panel every night.",
        tags=["juryflow"],
    )
    regression_deployment = regression.to_deployment(
        name="regression-nightly",
        schedules=[Cron(regression_cron, timezone=timezone)],
        parameters={**common, "baseline": baseline, **(thresholds or {})},
        description="Judge the suite again and fail when it regressed against the baseline.",
        tags=["juryflow"],
    )
    return [evaluate_deployment, regression_deployment]


def serve_nightly(**options: Any) -> None:
    """Serve both deployments until interrupted (Ctrl-C)."""
    from prefect import serve

    serve(*build_deployments(**options))
