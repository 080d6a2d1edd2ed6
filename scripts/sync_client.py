#!/usr/bin/env python3
"""Write the blocking client, service/cari/client/_sync/client.py, from the async one in
_async/ (python-trio's unasync: `async`/`await` dropped, async names made sync), formatted by
ruff. tests/test_client_schema.py fails when the written file is not what this makes."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import unasync

CLIENT = Path(__file__).resolve().parents[1] / "service" / "cari" / "client"
SOURCE = CLIENT / "_async" / "client.py"
TARGET = CLIENT / "_sync" / "client.py"
NAMES = {
    "AsyncClient": "Client",
    "aclose": "close",
    "aread": "read",
    "aiter_sse": "iter_sse",
    "anyio": "time",  # anyio.sleep → time.sleep
}


def sync_source() -> str:
    """The blocking client's source, as it should be."""
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder, "_async", "client.py")
        source.parent.mkdir()
        source.write_text(SOURCE.read_text(encoding="utf-8"), encoding="utf-8")
        rule = unasync.Rule("/_async/", "/_sync/", additional_replacements=NAMES)
        unasync.unasync_files([str(source)], rules=[rule])
        target = Path(folder, "_sync", "client.py")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "ruff",
                "check",
                "--fix",
                "--unsafe-fixes",
                "--quiet",
                str(target),
            ],
            check=False,
        )
        subprocess.run([sys.executable, "-m", "ruff", "format", "--quiet", str(target)], check=True)
        return target.read_text(encoding="utf-8")


if __name__ == "__main__":
    TARGET.write_text(sync_source(), encoding="utf-8")
