"""Memory of a run: chunk writes stay flat as the store grows, and ``bench/bench_memory.py``
runs (at a small size) the command bench/README.md gives.

Both in real child processes: peak RSS is the kernel's per process, and DuckDB's memory
limit is per database instance.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from juryflow.storage.connection import (
    CHUNK_WRITE_MEMORY_LIMIT,
    MEMORY_LIMIT_ENV,
    chunk_write_memory_limit,
)
from tests.conftest import REPO

# Writes 32 chunks of 250 items of ~14 KB each (112 MB in all) through Store.write_chunk, and
# prints the peak RSS of each write (VmHWM, reset before it through /proc/self/clear_refs).
WRITER = textwrap.dedent(
    """
    import os, re, sys
    from pathlib import Path
    from juryflow.maths.records import Item
    from juryflow.storage.store import Store

    def peak_mb():
        status = Path("/proc/self/status").read_text()
        return int(re.search(r"^VmHWM:\\s+(\\d+) kB", status, re.M).group(1)) // 1024

    store = Store(Path(sys.argv[1]))
    store.migrate()
    text = os.urandom(7000).hex()
    for chunk in range(32):
        items = [
            Item(f"item-{chunk}-{k}", {"reference": text, "response": str(k)})
            for k in range(250)
        ]
        Path("/proc/self/clear_refs").write_text("5")
        store.write_chunk("run", items, [], [])
        print(peak_mb(), flush=True)
    """
)


def _median(values: list[int]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return (ordered[middle - 1] + ordered[middle]) / 2 if len(ordered) % 2 == 0 else ordered[middle]


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_chunk_write_peaks_stop_growing_with_the_store(tmp_path: Path) -> None:
    """Each chunk's connection closes with a checkpoint that reads the items back; with the
    store's 256 MB buffer pool its peak grew with the items stored (+44 MB from the middle
    to the end of this run before the fix), with the chunk writes' own pool it levels off."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != MEMORY_LIMIT_ENV}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "store.duckdb")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    peaks = [int(line) for line in done.stdout.split()]
    assert len(peaks) == 32
    growth = _median(peaks[-8:]) - _median(peaks[12:20])
    assert growth < 25, f"chunk write peaks still grow: {peaks}"


def test_chunk_write_limit_keeps_an_explicit_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    assert chunk_write_memory_limit() == CHUNK_WRITE_MEMORY_LIMIT
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "1GB")
    assert chunk_write_memory_limit() is None


def test_a_chunk_too_large_for_the_small_pool_is_written_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Long texts can need more than the chunk writes' pool: the write is rolled back and
    made again with the store's own limit, every item stored once."""
    import juryflow.storage.store.writes as store_module
    from juryflow.maths.records import Item
    from juryflow.storage.store import Store

    store = Store(tmp_path / "store.duckdb")
    store.migrate()
    text = "x" * 14_000
    chunks = [
        [Item(f"i-{c}-{k}", {"reference": f"{k}{text}"}) for k in range(250)] for c in range(3)
    ]
    store.write_chunk("run", chunks[0], [], [])
    with pytest.raises(store_module._PoolTooSmall):
        store._write_chunk("run", chunks[1], [], [], "8MB")
    monkeypatch.setattr(store_module, "chunk_write_memory_limit", lambda: "8MB")
    store.write_chunk("run", chunks[1], [], [])
    store.write_chunk("run", chunks[2], [], [])
    _, rows = store.query("SELECT count(*), count(DISTINCT item_id) FROM items")
    assert rows == [(750, 750)]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/usr/bin/time").exists(), reason="the bench reads /usr/bin/time -v")
def test_bench_memory_command_at_a_small_size() -> None:
    """bench/README.md's command (``--sizes 10000,30000,100000 --panel stub --prefect
    both``) at 100 and 200 items: both Prefect modes, the whole tree and the verdicts."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    done = subprocess.run(
        [
            sys.executable,
            "bench/bench_memory.py",
            "--sizes",
            "100,200",
            "--panel",
            "stub",
            "--prefect",
            "both",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for mode in ("running Prefect server", "ephemeral Prefect"):
        for size in ("100", "200"):
            assert re.search(rf"{mode}:\s+{size} items: whole tree peak \d+ MB", out), out
        assert re.search(rf"{mode}: whole tree peak at 200 items: \d+ MB \(target", out), out
        assert f"{mode}: whole tree growth 100 -> 200 items" in out, out
    # the running server is outside the tree, and measured apart
    assert re.search(r"running Prefect server \(outside\): [1-9]\d* MB", out), out
    assert "load average after" in out


TRIM = textwrap.dedent(
    """
    import re
    from pathlib import Path
    from juryflow.flows.runtime.allocator import limit_malloc_arenas, release_free_heap

    def rss_mb():
        status = Path("/proc/self/status").read_text()
        return int(re.search(r"^VmRSS:\\s+(\\d+) kB", status, re.M).group(1)) // 1024

    limit_malloc_arenas()
    # Many small blocks (below malloc's mmap threshold), the last one kept: freeing the
    # others leaves free heap under it that only a trim gives back.
    blocks = [bytearray(4000) for _ in range(50_000)]
    keep = bytearray(4000)
    del blocks
    before = rss_mb()
    release_free_heap()
    print(before, rss_mb(), keep[0])
    """
)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_release_free_heap_gives_freed_memory_back(tmp_path: Path) -> None:
    script = tmp_path / "trim.py"
    script.write_text(TRIM, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True
    )
    before, after, _ = (int(n) for n in done.stdout.split())
    assert before - after > 100, done.stdout  # ~200 MB were freed
