"""The `cari` command as a user runs it: real subprocesses, real HTTP, real PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import click
import psycopg
import pytest

from cari.cli.common import user_errors
from cari.db import embedded
from tests.conftest import data_dir_with_model

CARI = [sys.executable, "-m", "cari.cli"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http(method: str, url: str, body: object = None) -> tuple[int, dict[str, object]]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CARI, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@contextmanager
def serving(
    env: dict[str, str],
    cari: Sequence[str] = CARI,
    output: list[str] | None = None,
    started: list[subprocess.Popen[str]] | None = None,
) -> Iterator[str]:
    """`cari serve` in a subprocess (`cari` runs the command); yields its base URL once /readyz
    answers 200. What it printed is appended to `output` when it has exited; the process to
    `started` when it has started."""
    port = free_port()
    # Its output goes to a file, not a pipe nobody reads while it serves: a full pipe would
    # block the server's next log line, and with it every request.
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(
            [*cari, "serve", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        if started is not None:
            started.append(process)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120  # a fresh data folder builds the extension first
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    pytest.fail(f"cari serve exited early:\n{log.read()}")
                try:
                    if http("GET", f"{base}/readyz")[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail("cari serve did not become ready within 120 s")
                time.sleep(0.2)
            yield base
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
            log.seek(0)
            printed = log.read()
    if output is not None:
        output.append(printed)
    assert process.returncode == 0, printed


def test_serve_with_database_url(dsn: str, clean_env: dict[str, str]) -> None:
    env = {**clean_env, "DATABASE_URL": dsn}
    with serving(env) as base:
        status, body = http("GET", f"{base}/readyz")
        assert (status, body["status"]) == (200, "ready")
        status, _ = http("POST", f"{base}/v1/collections", {"name": "docs"})
        assert status == 201


SLICE_PROBE = """
import subprocess, sys, threading
from cari.cli.priority import ask_short_slices

def slice_ns(tid):
    for line in open(f"/proc/self/task/{tid}/sched"):
        if line.startswith("se.slice"):
            return int(line.split(":")[1])
    return -1

asked = ask_short_slices(int(sys.argv[1]))
seen = []
thread = threading.Thread(target=lambda: seen.append(slice_ns(threading.get_native_id())))
thread.start()
thread.join()
child = subprocess.run(["grep", "se.slice", "/proc/self/sched"], capture_output=True, text=True)
print(asked, slice_ns(threading.get_native_id()), seen[0], child.stdout.split(":")[-1].strip())
"""


def slices(pid: int) -> set[int]:
    """The time slice (ns) of each thread of process `pid`, as the kernel reports them."""
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "sched").read_text().splitlines():
            if line.startswith("se.slice"):
                found.add(int(line.split(":")[1]))
    return found


def test_serve_asks_for_short_time_slices(dsn: str, clean_env: dict[str, str]) -> None:
    """`cari serve` asks for CARI_SERVE_TIME_SLICE_US (100 us) slices; threads and processes
    started after the request inherit them; 0 asks for nothing."""
    probe = [sys.executable, "-c", SLICE_PROBE]
    default = subprocess.run([*probe, "0"], capture_output=True, text=True, check=True).stdout
    short = subprocess.run([*probe, "250"], capture_output=True, text=True, check=True).stdout
    asked, main, thread, child = short.split()
    if asked != "True" or main == "-1" or main == default.split()[1]:
        pytest.skip(f"this kernel reports no custom time slices ({short.strip()})")
    assert (main, thread, child) == ("250000",) * 3
    assert default.split()[0] == "False"

    started: list[subprocess.Popen[str]] = []
    with serving({**clean_env, "DATABASE_URL": dsn}, started=started) as base:
        assert http("GET", f"{base}/v1/collections")[0] == 200
        assert slices(started[0].pid) == {100_000}


def test_serve_on_embedded_default(tmp_path: Path, clean_env: dict[str, str]) -> None:
    data_dir = tmp_path / "data"
    env = {**clean_env, "CARI_DATA_DIR": str(data_dir)}
    with serving(env) as base:
        assert http("POST", f"{base}/v1/collections", {"name": "faq"})[0] == 201
        # Cari's keyword extension, built at this first start, serves (where gcc and make are).
        if shutil.which("gcc") and shutil.which("make"):
            assert http("GET", f"{base}/readyz")[1]["keyword_engine"] == "cari_bm25"
    # The server was the embedded server's last user: it stopped it.
    assert embedded.running_dsn(data_dir) is None

    # Data persists across runs.
    with serving(env) as base:
        status, body = http("GET", f"{base}/v1/collections/faq")
        assert (status, body["name"]) == (200, "faq")
    assert embedded.running_dsn(data_dir) is None


def psql(dsn: str, statement: str) -> str:
    result = subprocess.run(
        [str(embedded.client_tool("psql")), dsn, "-Atc", statement],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def test_db_url_keeps_server_until_stopped(tmp_path: Path, clean_env: dict[str, str]) -> None:
    env = {**clean_env, "CARI_DATA_DIR": str(tmp_path / "data")}
    first = run(["db", "url"], env)
    assert first.returncode == 0, first.stderr
    dsn = first.stdout.strip()
    assert embedded.running_dsn(tmp_path / "data") == dsn
    # Later Cari processes that exit leave it running for the DBA.
    assert run(["migrate"], env).returncode == 0
    assert psql(dsn, "SELECT count(*) FROM collections") == "0"
    stopped = run(["db", "stop"], env)
    assert stopped.stdout.strip() == "stopped"
    assert embedded.running_dsn(tmp_path / "data") is None
    assert run(["db", "stop"], env).stderr.strip() == "not running"


def test_db_url_keeps_server_after_a_running_server_exits(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    data_dir = data_dir_with_model(tmp_path / "data")
    env = {**clean_env, "CARI_DATA_DIR": str(data_dir)}
    with serving(env):
        dsn = run(["db", "url"], env).stdout.strip()
    # `cari serve` was the last Cari process, yet the DBA's DSN still works.
    assert psql(dsn, "SELECT 1") == "1"
    assert run(["db", "stop"], env).stdout.strip() == "stopped"


def test_db_stop_refuses_while_cari_uses_the_server(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    data_dir = data_dir_with_model(tmp_path / "data")
    env = {**clean_env, "CARI_DATA_DIR": str(data_dir)}
    with serving(env) as base:
        refused = run(["db", "stop"], env)
        assert refused.returncode == 1
        assert "in use by 1 Cari process" in refused.stderr and "--force" in refused.stderr
        assert http("GET", f"{base}/readyz")[0] == 200  # untouched
        forced = run(["db", "stop", "--force"], env)
        assert forced.stdout.strip() == "stopped", forced.stderr
        assert embedded.running_dsn(data_dir) is None
        assert http("GET", f"{base}/readyz")[0] == 503  # the serving process sees it go


def test_migrate_down_and_up(dsn: str, clean_env: dict[str, str]) -> None:
    env = {**clean_env, "DATABASE_URL": dsn}
    down = run(["migrate", "--downgrade", "base"], env)
    assert down.returncode == 0, down.stderr
    up = run(["migrate"], env)
    assert up.returncode == 0, up.stderr
    assert up.stdout.strip() == "upgraded to head"


@pytest.mark.parametrize(
    ("args", "env_extra", "message"),
    [
        (["serve"], {"DATABASE_URL": "postgresql://h:port/db"}, "DATABASE_URL"),
        (
            ["migrate"],
            {"DATABASE_URL": "postgresql://cari@127.0.0.1:9/cari?connect_timeout=2"},
            "cannot connect to PostgreSQL",
        ),
        (["serve", "--host", "0.0.0.0"], {}, "CARI_API_KEYS"),
        (["serve"], {"CARI_PORT": "99999"}, "CARI_PORT"),
    ],
)
def test_bad_input_is_one_line(
    args: list[str], env_extra: dict[str, str], message: str, clean_env: dict[str, str]
) -> None:
    result = run(args, {**clean_env, **env_extra})
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert message in lines[0]


def test_unwritable_data_dir_is_one_line(tmp_path: Path, clean_env: dict[str, str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run(["migrate"], {**clean_env, "CARI_DATA_DIR": str(blocker / "data")})
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"Error: CARI_DATA_DIR {blocker / 'data'} is not a writable folder: Not a directory"
    ]


def test_unknown_revision_is_one_line(dsn: str, clean_env: dict[str, str]) -> None:
    result = run(["migrate", "--revision", "nope"], {**clean_env, "DATABASE_URL": dsn})
    assert result.returncode == 1
    assert result.stderr.startswith("Error: revision: ")
    assert "Traceback" not in result.stderr


def test_embedder_misconfiguration_is_one_line(dsn: str, clean_env: dict[str, str]) -> None:
    env = {
        **clean_env,
        "DATABASE_URL": dsn,
        "CARI_EMBEDDER": "openai",
        "CARI_EMBEDDING_DIMENSIONS": "384",
    }
    result = run(["serve"], env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ") and "CARI_EMBEDDING_MODEL" in lines[0]


def test_embedded_server_is_sized_for_the_machine(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    data_dir = tmp_path / "data"
    env = {**clean_env, "CARI_DATA_DIR": str(data_dir), "CARI_EMBEDDED_SHARED_BUFFERS_MB": "200"}
    size = "SELECT pg_size_bytes(current_setting('shared_buffers')) / 1048576"
    cache = "SELECT pg_size_bytes(current_setting('effective_cache_size')) / 1048576"
    # A new server is created, then restarted with the settings.
    dsn = run(["db", "url"], env).stdout.strip()
    assert psql(dsn, size) == "200"
    assert psql(dsn, cache) == str(max(embedded.machine_memory_mb() // 2, 200))
    conf = embedded.pgdata_path(data_dir) / embedded.CONFIG_FILE
    assert "shared_buffers = '200MB'" in conf.read_text()

    # A running server keeps its buffers until it restarts, and says so.
    changed = run(["migrate"], {**env, "CARI_EMBEDDED_SHARED_BUFFERS_MB": "300"})
    assert changed.returncode == 0, changed.stderr
    assert "applies when it restarts" in changed.stderr
    assert psql(dsn, size) == "200"
    assert run(["db", "stop"], env).stdout.strip() == "stopped"
    env["CARI_EMBEDDED_SHARED_BUFFERS_MB"] = "300"
    dsn = run(["db", "url"], env).stdout.strip()
    assert psql(dsn, size) == "300"

    # A DBA's ALTER SYSTEM wins over Cari's file.
    psql(dsn, "ALTER SYSTEM SET shared_buffers = '160MB'")
    assert run(["db", "stop"], env).stdout.strip() == "stopped"
    dsn = run(["db", "url"], env).stdout.strip()
    assert psql(dsn, size) == "160"
    assert run(["db", "stop"], env).stdout.strip() == "stopped"


def test_serve_restarts_the_embedded_server_after_it_crashes(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    data_dir = data_dir_with_model(tmp_path / "data")
    env = {**clean_env, "CARI_DATA_DIR": str(data_dir)}
    with serving(env) as base:
        assert http("POST", f"{base}/v1/collections", {"name": "faq"})[0] == 201
        pid_file = embedded.pgdata_path(data_dir) / "postmaster.pid"
        postmaster = int(pid_file.read_text().split()[0])
        os.kill(postmaster, signal.SIGKILL)
        killed = time.monotonic()

        # Within a few seconds a new server runs and the service serves again, with nothing
        # lost and no manual step.
        def restarted() -> bool:
            try:
                return int(pid_file.read_text().split()[0]) != postmaster
            except (OSError, ValueError, IndexError):
                return False

        while not (restarted() and http("GET", f"{base}/readyz")[0] == 200):
            # A bound for a busy machine; the time it takes idle is a benchmark figure.
            assert time.monotonic() - killed < 60, "not back within 60 s"
            time.sleep(0.2)
        status, body = http("GET", f"{base}/v1/collections/faq")
        assert (status, body["name"]) == (200, "faq")
    # A deliberate stop is not undone.
    with serving(env) as base:
        assert run(["db", "stop", "--force"], env).stdout.strip() == "stopped"
        time.sleep(3)
        assert http("GET", f"{base}/readyz")[0] == 503
        assert embedded.running_dsn(data_dir) is None


def test_database_failures_read_as_the_api_says_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command whose statement times out, or whose database goes away, ends with one line
    saying so, not the driver's text with the statement in it."""
    monkeypatch.setenv("CARI_STATEMENT_TIMEOUT_MS", "1234")

    @user_errors
    def slow() -> None:
        raise psycopg.errors.QueryCanceled("canceling statement due to statement timeout\nSELECT 1")

    @user_errors
    def gone() -> None:
        raise psycopg.OperationalError("server closed the connection unexpectedly at host db-7")

    with pytest.raises(click.ClickException) as slow_error:
        slow()
    assert slow_error.value.message == (
        "the database cancelled a statement that ran longer than 1234 ms "
        "(CARI_STATEMENT_TIMEOUT_MS)"
    )
    with pytest.raises(click.ClickException) as gone_error:
        gone()
    assert gone_error.value.message == "database unavailable"


BATCH_PRIORITY = """
import os, psutil, re
from pathlib import Path
from cari.cli.common import run, settings

def group():
    # This session's autogroup niceness; -99 where the kernel has none.
    found = re.search(r"nice (-?\\d+)", Path("/proc/self/autogroup").read_text()) if Path(
        "/proc/self/autogroup").exists() else None
    return int(found.group(1)) if found else -99

async def work(rt):
    async with rt.pool.connection() as conn:
        cur = await conn.execute("SELECT pg_backend_pid()")
        backend = (await cur.fetchone())[0]
    return os.nice(0), psutil.Process(backend).nice(), group()

print(*run(work, settings(), batch=True), os.nice(0), group())
"""


def default_priority(env: dict[str, str]) -> dict[str, str]:
    """`env` without the test run's batch priority (clean_env's), so the default applies."""
    return {k: v for k, v in env.items() if k != "CARI_BATCH_NICENESS"}


@pytest.mark.parametrize(("niceness", "lowered"), [(None, 19), ("0", 0), ("3", 3)])
def test_a_batch_job_yields_the_cpu_but_its_database_does_not(
    dsn: str, clean_env: dict[str, str], niceness: str | None, lowered: int
) -> None:
    """`cari ingest`, `reembed` and `refit` run at CARI_BATCH_NICENESS (19 by default) once the
    database is up, and so does their session's autogroup while they run (Linux shares the CPU
    between sessions first: `bench.serving`); the database's own processes keep their
    priority."""
    env = {**default_priority(clean_env), "DATABASE_URL": dsn}
    if niceness is not None:
        env["CARI_BATCH_NICENESS"] = niceness
    # A session of its own, as a command typed in another terminal: its autogroup is new (nice
    # 0), and this test's is left alone.
    done = subprocess.run(
        [sys.executable, "-c", BATCH_PRIORITY],
        env=env,
        capture_output=True,
        text=True,
        start_new_session=True,
    )
    assert done.returncode == 0, done.stderr
    work, backend, group, after, group_after = map(int, done.stdout.split())
    start = os.nice(0)
    assert (work, after) == (start + lowered, start + lowered)
    if Path("/proc/self/autogroup").exists():
        assert (group, group_after) == (lowered, 0)
    if lowered:
        assert backend < work  # the server's backend was not lowered with the command


BATCH_SESSION = """
import asyncio, os, re, sys
from pathlib import Path
from cari.cli.common import run, settings

def group(pid):
    return int(re.search(r"nice (-?\\d+)", Path(f"/proc/{pid}/autogroup").read_text()).group(1))

async def work(rt):
    print(os.getpid(), int(os.getsid(0) == os.getpid()), group("self"), group(os.getppid()),
          flush=True)
    if os.environ.get("WAIT"):
        await asyncio.sleep(300)

run(work, settings(), batch=True)
print("done", flush=True)
"""


def _state(pid: int) -> str:
    """`pid`'s state letter (R, S, T: stopped, Z: a zombie), "gone" once reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def _until(pids: Sequence[int], accepted: Callable[[set[str]], bool], what: str) -> None:
    """Wait until the states of `pids` are `accepted` (a guard against hanging, not a timing)."""
    deadline = time.monotonic() + 60
    while not accepted({_state(pid) for pid in pids}):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _autogroup(pid: int) -> int:
    return int(re.search(r"nice (-?\d+)", Path(f"/proc/{pid}/autogroup").read_text()).group(1))


# A caller with an autogroup of its own, whatever this test run's session is (a process in the
# boot session's, or in a cpu cgroup, has none to show): a shell, or a script, in a session of
# its own. It starts the command (in a process group of its own, as a shell's job control does,
# or in its own) with Ctrl-C's default action (this test run may have been started in the
# background of a script, where it is ignored, and so by everything it starts), says its pid
# and the command's, and ends as the command does.
CALLER = """
import os, signal, subprocess, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
group = 0 if sys.argv[1] == "shell" else None
command = subprocess.Popen(sys.argv[2:], process_group=group)
print(os.getpid(), command.pid, flush=True)
code = command.wait()
if code < 0:
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="no autogroups here")
@pytest.mark.parametrize("caller", ["shell", "script"], ids=["typed in a shell", "scripted"])
def test_a_batch_job_lowers_a_session_of_its_own(
    dsn: str, clean_env: dict[str, str], caller: str
) -> None:
    """A command typed in a shell (leading its process group in the shell's session) or run by
    a script (in the script's group): the job forks into a session of its own and lowers that
    one's autogroup, never the caller's (which holds the shell, anything started from it, or a
    whole test run); the command passes on the job's output and exit status, and the signals it
    gets."""

    def start(**env: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", CALLER, caller, sys.executable, "-c", BATCH_SESSION],
            env={**default_priority(clean_env), "DATABASE_URL": dsn, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def said(lines: Iterable[str]) -> dict[int, list[int]]:
        """The caller's line (its pid, the command's) and the job's (pid, whether it leads its
        session, its autogroup's niceness, its parent's), by length: both write to one pipe."""
        found: dict[int, list[int]] = {}
        for line in lines:
            fields = list(map(int, line.split()))
            found[len(fields)] = fields
            if len(found) == 2:
                break
        return found

    done = start()
    out, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    lines = out.splitlines()
    assert lines[-1] == "done"
    found = said(lines[:-1])
    shell, command = found[2]
    job, own, lowered, seen = found[4]
    assert (job != command, own, lowered, seen) == (True, 1, 19, 0)

    # Ctrl-C (or a kill) reaches the command, which is in the caller's process group, and the
    # command passes it on; SIGKILL, which it cannot catch, takes the job with it; a job killed
    # on its own (the OOM killer, a `kill -9` of its pid) ends the command as it ended.
    for sent, to_job in ((signal.SIGINT, False), (signal.SIGKILL, False), (signal.SIGKILL, True)):
        waiting, command = start(WAIT="1"), 0
        try:
            assert waiting.stdout is not None
            found = said(waiting.stdout)
            (shell, command), job = found[2], found[4][0]
            both = (job, command)
            if sent == signal.SIGINT:  # Ctrl-Z stops both, `fg` goes on with both
                os.kill(command, signal.SIGTSTP)
                _until(both, lambda states: states == {"T"}, "not stopped")
                os.kill(command, signal.SIGCONT)
                _until(both, lambda states: "T" not in states, "not going on")
            assert _autogroup(shell) == 0  # the caller's, left alone
            os.kill(job if to_job else command, sent)
            assert waiting.wait(timeout=120) == -sent
            _until([job], lambda states: states <= {"Z", "gone"}, f"{job} outlived its command")
        finally:
            if command and waiting.poll() is None:  # failed on the way: the job goes with it
                os.kill(command, signal.SIGKILL)
            waiting.kill()
            waiting.communicate()
