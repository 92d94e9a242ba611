"""Pages about runs: the runs list, one run's agreement figures, a comparison of two runs."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from juryflow.storage.reads.run_queries import resolve_run_id
from juryflow.storage.store import Store
from juryflow.viewer import compare_model, run_model
from juryflow.viewer.rendering import render, state_of

# the formatting helpers the templates call, so that a figure reads as in the terminal
FORMAT: dict[str, Any] = {
    "num": run_model.num,
    "pct": run_model.pct,
    "signed": run_model.signed,
    "stat": run_model.stat,
}


def _resolve(store: Store, text: str, what: str = "run") -> str:
    """The run ``text`` names (its id or a unique prefix), or a 404 page."""
    from juryflow.storage.reads.run_queries import RunIdError

    try:
        return resolve_run_id(store, text)
    except RunIdError as error:
        message = str(error)
        if message.startswith("no run"):  # the CLI's "`juryflow runs` lists them"
            message = f"no run {text!r} in {store.path}; the runs page (/) lists them"
        raise HTTPException(404, f"{what}: {message}" if what != "run" else message) from None


def runs(request: Request) -> Response:
    with state_of(request).exclusive() as store:
        page = run_model.load_runs_page(store)
    return render(request, "runs.html", page=page, **FORMAT)


def run(request: Request) -> Response:
    with state_of(request).exclusive() as store:
        run_id = _resolve(store, request.path_params["run_id"])
        page = run_model.load_run_page(store, run_id)
    if page is None:  # deleted between the two reads
        raise HTTPException(404, f"no run {run_id!r}; the runs page lists them")
    return render(request, "run.html", page=page, **FORMAT)


def _one(request: Request, name: str) -> str:
    values = request.query_params.getlist(name)
    if len(values) != 1 or not values[0].strip():
        raise HTTPException(
            400, f"pick two runs to compare: /compare?a=BASELINE_RUN&b=RUN (missing {name})"
        )
    return values[0].strip()


def compare_runs(request: Request) -> Response:
    unknown = sorted(set(request.query_params) - {"a", "b"})
    if unknown:
        raise HTTPException(400, f"unknown parameter {unknown[0]!r}: /compare takes a and b")
    a, b = _one(request, "a"), _one(request, "b")
    with state_of(request).exclusive() as store:
        baseline, current = _resolve(store, a, "a"), _resolve(store, b, "b")
        page = compare_model.load_pair(store, baseline, current)
    return render(request, "compare.html", page=page, **FORMAT)


def stored_comparison(request: Request) -> Response:
    comparison_id = request.path_params["comparison_id"]
    with state_of(request).exclusive() as store:
        try:
            page = compare_model.load_stored(store, comparison_id)
        except compare_model.MissingRun as error:
            raise HTTPException(404, str(error)) from None
    if page is None:
        raise HTTPException(
            404, f"no comparison {comparison_id!r} in the store; the runs page lists them"
        )
    return render(request, "compare.html", page=page, **FORMAT)


def routes() -> list[BaseRoute]:
    return [
        Route("/", runs, methods=["GET"], name="runs"),
        Route("/runs/{run_id}", run, methods=["GET"], name="run"),
        Route("/compare", compare_runs, methods=["GET"], name="compare"),
        Route(
            "/comparisons/{comparison_id}", stored_comparison, methods=["GET"], name="comparison"
        ),
    ]
