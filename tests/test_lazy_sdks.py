"""A run imports a provider's SDK only when one of its judges makes a call.

Importing ``anthropic`` costs about a second of CPU and ``openai`` a third; the embedded
offline panel (the README's quick start) needs neither, and a model panel imports each
when its first client is built.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, SAMPLE

SDKS = ("anthropic", "openai")


def _imported(stderr: str) -> set[str]:
    """Top-level packages named in ``-X importtime`` output."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def test_the_offline_quick_start_imports_no_provider_sdk(tmp_path: Path) -> None:
    db = str(tmp_path / "s.duckdb")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "juryflow", "run", str(SAMPLE), "--db", db],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    imported = _imported(done.stderr)
    assert "juryflow" in imported  # the output is the import log it should be
    assert not imported & set(SDKS)


def test_a_provider_client_imports_its_sdk_when_it_is_built() -> None:
    code = (
        "import sys\n"
        "from juryflow.judges.providers.openai import OpenAIClient\n"
        "import juryflow.flows.evaluate, juryflow.cli.commands\n"
        "assert 'openai' not in sys.modules and 'anthropic' not in sys.modules\n"
        "client = OpenAIClient('k', base_url='http://127.0.0.1:9/v1')\n"
        "assert 'openai' not in sys.modules\n"
        "import asyncio\n"
        "async def main():\n"
        "    client.warm()\n"
        "    assert client.transport() is not None\n"
        "    await client.aclose()\n"
        "asyncio.run(main())\n"
        "assert 'openai' in sys.modules and 'anthropic' not in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
