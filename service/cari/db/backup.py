"""Backups of Cari's database with PostgreSQL's own pg_dump and pg_restore, the ones that ship
with the embedded server (major version 18: they also serve an external server of version 18
or older).

A backup is pg_dump's custom format: every table, the BM25 postings and statistics included,
so a restored database ranks exactly as the one dumped; indexes (HNSW too) are rebuilt by the
restore. A restore replaces what the backup holds in one transaction, so a failed restore
changes nothing. Cari's keyword extension is left out (it holds functions, no data): a backup
restores on a server without it, and Cari creates it after the restore where the server has it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from cari.db import embedded, extension
from cari.errors import CariError


def dump(dsn: str, path: Path) -> None:
    """Write the database at `dsn` to `path` (overwritten)."""
    _run(
        "pg_dump",
        dsn,
        ["--format=custom", f"--exclude-extension={extension.NAME}", f"--file={path}"],
    )


def restore(dsn: str, path: Path) -> None:
    """Replace the database at `dsn` with the backup at `path`."""
    if not path.is_file():
        raise CariError(f"no backup at {path}")
    _run(
        "pg_restore",
        dsn,
        # --clean drops each object the backup holds before creating it again; --no-owner
        # leaves the objects to whoever restores, as the dumping role may not exist here.
        [
            "--clean",
            "--if-exists",
            "--no-owner",
            "--single-transaction",
            "--exit-on-error",
            str(path),
        ],
    )


def _run(tool: str, dsn: str, arguments: list[str]) -> None:
    # The password goes through the environment, not the command line every user can read.
    params = conninfo_to_dict(dsn)
    password = params.pop("password", None)
    env = {**os.environ, **({"PGPASSWORD": str(password)} if password is not None else {})}
    command = [
        str(embedded.client_tool(tool)),
        f"--dbname={make_conninfo('', **params)}",
        *arguments,
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise CariError(
            f"{tool} failed: {lines[-1] if lines else f'exit status {done.returncode}'}"
        )
