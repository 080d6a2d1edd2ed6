"""Streaming standbys of a PostgreSQL server on this machine, to serve reads
(`CARI_READ_DATABASE_URLS`; `cari db replica` makes one of the embedded server).

A standby is a copy of the primary taken with `pg_basebackup -R -X stream` (the binaries ship
with the embedded server), which writes `standby.signal` and the primary's connection into the
copy: started, it replays the primary's WAL as the primary writes it and serves reads only. It
listens on a Unix socket in its own folder, like the embedded server.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from cari.db import embedded
from cari.errors import CariError, DatabaseUnavailable

START_TIMEOUT_S = 120  # replaying the WAL written during the copy can take a while
# The longest Unix socket path (sun_path less its NUL), and the name PostgreSQL gives its socket.
SOCKET_PATH_MAX = 107
SOCKET_NAME = ".s.PGSQL.5432"


def create(primary_dsn: str, pgdata: Path, *, user: str | None = None) -> None:
    """Copy the primary at `primary_dsn` into the new folder `pgdata`, set to follow it. As
    root, `user` (the primary's system user) owns the copy and runs the standby."""
    if (pgdata / "PG_VERSION").exists():
        raise CariError(f"{pgdata} holds a server already")
    pgdata.mkdir(parents=True, exist_ok=True)
    pgdata.chmod(0o700)
    if user is not None:
        shutil.chown(pgdata, user, user)
        # The folders above must let that user through, as for the embedded server.
        embedded._library().utils.ensure_prefix_permissions(pgdata)
    command = [
        str(embedded.client_tool("pg_basebackup")),
        *("--pgdata", str(pgdata), "--dbname", primary_dsn),
        *("--write-recovery-conf", "--wal-method", "stream", "--checkpoint", "fast"),
    ]
    try:
        subprocess.run(
            command, check=True, capture_output=True, text=True, user=user, timeout=START_TIMEOUT_S
        )
    except subprocess.CalledProcessError as exc:
        reason = " ".join(exc.stderr.split()) or f"exit status {exc.returncode}"
        raise DatabaseUnavailable(f"pg_basebackup could not copy the primary: {reason}") from None
    except (subprocess.SubprocessError, OSError) as exc:
        raise DatabaseUnavailable(f"pg_basebackup could not copy the primary: {exc}") from None
    # The primary's own bookkeeping came along in the copy (its socket's lock file too, as
    # its socket is in its folder): not the standby's.
    for copied in ("log", ".handle_pids.json", *(p.name for p in pgdata.glob(".s.PGSQL.*"))):
        (pgdata / copied).unlink(missing_ok=True)


def start(pgdata: Path) -> str:
    """Start the standby in `pgdata` (unless it runs) and return its DSN for Cari's
    database."""
    library = embedded._library()
    if running_dsn(pgdata) is None:
        try:
            library.pg_ctl(
                [
                    *("-w", "-t", str(START_TIMEOUT_S), "-l", str(pgdata / "log")),
                    # No TCP: a Unix socket in its folder, as the embedded server.
                    *("-o", '-h ""', "-o", f"-k {_socket_dir(pgdata)}", "start"),
                ],
                pgdata=pgdata,
                user=_owner(pgdata),
                timeout=START_TIMEOUT_S + 10,
            )
        except (subprocess.SubprocessError, OSError) as exc:
            raise DatabaseUnavailable(
                f"the standby in {pgdata} did not start ({exc}); its log is {pgdata}/log"
            ) from None
    dsn = running_dsn(pgdata)
    if dsn is None:
        raise DatabaseUnavailable(f"the standby in {pgdata} stopped; its log is {pgdata}/log")
    return dsn


def stop(pgdata: Path) -> bool:
    """Stop the standby in `pgdata`; False if it was not running."""
    if running_dsn(pgdata) is None:
        return False
    embedded._library().pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=_owner(pgdata))
    return True


def running_dsn(pgdata: Path) -> str | None:
    """The DSN of the standby in `pgdata` if it is running now."""
    info = embedded._library().utils.PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        return None
    return str(info.get_uri(database=embedded.DATABASE_NAME))


def _socket_dir(pgdata: Path) -> Path:
    """The standby's folder, unless its socket's path would be longer than a Unix socket's
    can be (a deep data folder): then a folder of its own in the temporary directory, named
    after the standby's. Its DSN follows, read from postmaster.pid."""
    if len(str(pgdata / SOCKET_NAME)) <= SOCKET_PATH_MAX:
        return pgdata
    name = hashlib.sha256(str(pgdata.resolve()).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"cari-standby-{name}"
    folder.mkdir(mode=0o700, exist_ok=True)
    if (owner := _owner(pgdata)) is not None:
        shutil.chown(folder, owner, owner)
    return folder


def _owner(pgdata: Path) -> str | None:
    # PostgreSQL refuses to run as root: the embedded library runs it as its own system user.
    return pgdata.owner() if os.geteuid() == 0 else None
