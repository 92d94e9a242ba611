"""The viewer's safety over real HTTP: writes only from its own pages, only at the host it
was bound to, headers that forbid foreign scripts, and a busy store said as such (503)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from juryflow.storage.store import Store
from juryflow.viewer.app import create_app
from juryflow.viewer.security import LOOPBACK_HOSTS
from juryflow.viewer.server import RunningViewer, start_in_thread
from juryflow.viewer.state import ViewerState


async def _accepted(request: Request) -> Response:
    return PlainTextResponse("accepted")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store(tmp_path_factory.mktemp("viewer-security") / "store.duckdb")
    store.migrate()
    return store


@pytest.fixture(scope="module")
def viewer(store: Store) -> Iterator[RunningViewer]:
    state = ViewerState(store, "tester", allowed_hosts=LOOPBACK_HOSTS)
    app = create_app(state)
    # a test-only write route: the middleware guards every non-GET request alike
    app.router.routes.append(Route("/test-write", _accepted, methods=["POST", "PUT", "DELETE"]))
    running = start_in_thread(state, app=app)
    yield running
    running.stop()


@pytest.fixture
def client(viewer: RunningViewer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=viewer.url, timeout=30) as c:
        yield c


def _own(viewer: RunningViewer) -> str:
    return viewer.url.rstrip("/")


def test_same_origin_post_goes_through(viewer: RunningViewer, client: httpx.Client) -> None:
    own = _own(viewer)
    for headers in (
        {"Origin": own},
        {"Origin": own, "Sec-Fetch-Site": "same-origin"},
        {"Referer": f"{own}/runs/x/item?id=1"},  # no Origin: an older browser's form post
    ):
        response = client.post("/test-write", headers=headers, data={"verdict": "clean"})
        assert response.status_code == 200, (headers, response.text)
        assert response.text == "accepted"


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},  # a sandboxed frame or a file:// page
        {"Origin": "http://127.0.0.1:1"},  # same host, another port: another origin
        {"Referer": "http://evil.example/page"},
        {},  # neither Origin nor Referer
        {"Sec-Fetch-Site": "cross-site", "Referer": "OWN"},
    ],
)
def test_cross_origin_writes_are_refused(
    viewer: RunningViewer, client: httpx.Client, headers: dict[str, str]
) -> None:
    headers = {k: v.replace("OWN", _own(viewer) + "/") for k, v in headers.items()}
    for method in ("POST", "PUT", "DELETE"):
        response = client.request(method, "/test-write", headers=headers)
        assert response.status_code == 403, (method, headers)
        assert "accepted" not in response.text
        assert "refused: a change to the store must come from the viewer's own pages" in (
            response.text.replace("&#39;", "'")
        )
        assert response.headers["content-security-policy"].startswith("default-src 'none'")


def test_every_response_carries_the_safety_headers(client: httpx.Client) -> None:
    for path in ("/", "/runs/none", "/static/missing.js"):
        response = client.get(path)
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "same-origin"
        policy = response.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]


def test_a_foreign_host_name_is_refused(viewer: RunningViewer, client: httpx.Client) -> None:
    """DNS rebinding: a page at evil.example whose name now points at 127.0.0.1."""
    port = viewer.url.rsplit(":", 1)[1].strip("/")
    response = client.get("/", headers={"Host": f"evil.example:{port}"})
    assert response.status_code == 421
    assert client.get("/", headers={"Host": f"localhost:{port}"}).status_code == 200


def test_static_files_are_served_from_the_package(client: httpx.Client) -> None:
    assert client.get("/static/missing.js").status_code == 404


def test_a_store_held_by_a_run_is_a_busy_page(
    store: Store, client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JURYFLOW_LOCK_WAIT_SECONDS", "0.3")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
            "print('holding', flush=True); time.sleep(60)",
            str(Path(store.path)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        response = client.get("/")
        assert response.status_code == 503
        assert "the store is busy" in response.text and "Traceback" not in response.text
        assert response.headers["retry-after"]
    finally:
        holder.kill()
        holder.wait()
    assert client.get("/").status_code == 200
