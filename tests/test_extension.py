"""Cari's keyword extension as a user gets it: built with the embedded server's own pg_config
into a folder of the data folder, loaded by the embedded server from there, created by the
migrations; where it cannot be built, one warning and the SQL statement."""

from __future__ import annotations

import logging
import re
import shutil
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cari.db import embedded, extension
from cari.runtime import open_runtime
from tests.conftest import app_client, data_dir_with_model, settings_for
from tests.test_cli import http, run, serving

# CI machines have both; without them the build is expected to fall back instead.
CAN_BUILD = shutil.which("make") is not None and shutil.which("gcc") is not None


@pytest.fixture(autouse=True)
def _unsaid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a new process would: nothing said yet."""
    monkeypatch.setattr(extension, "_said", set())


@pytest.fixture
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the extension's sources, which the build reads instead of the checkout's."""
    copy = tmp_path / "src"
    shutil.copytree(
        extension.sources(), copy, ignore=shutil.ignore_patterns(*extension.BUILD_OUTPUTS)
    )
    monkeypatch.setattr(extension, "sources", lambda: copy)
    return copy


def _builds(caplog: pytest.LogCaptureFixture) -> int:
    return sum(r.getMessage().startswith("building ") for r in caplog.records)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def _show(conn: psycopg.Connection[Any], setting: str) -> str:
    row = conn.execute("SELECT current_setting(%s)", [setting]).fetchone()
    assert row is not None
    return str(row[0])


def _embedded_folder(dsn: str) -> Path | None:
    """The extension's folder the session's server was told about, if it is Cari's embedded
    server (its data folder holds cari.conf) and was given one."""
    with psycopg.connect(dsn) as conn:
        data = Path(_show(conn, "data_directory"))
        path = _show(conn, "extension_control_path")
    if not (data / embedded.CONFIG_FILE).exists():
        return None
    found = re.fullmatch(r"\$system:(.+)/share", path)
    return Path(found.group(1)) if found else None


@pytest.mark.skipif(not CAN_BUILD, reason="no gcc or make: the build falls back")
def test_the_embedded_server_loads_the_build_in_its_data_folder(dsn: str) -> None:
    folder = _embedded_folder(dsn)
    if folder is None:
        pytest.skip("the session's server is not Cari's embedded server")
    assert folder.parent.name == "ext" and folder.name.startswith("18-"), folder
    assert (folder / "share" / "extension" / "cari_bm25.control").is_file()
    assert (folder / "lib" / "cari_bm25.so").is_file()
    with psycopg.connect(dsn) as conn:
        # The migrations created it; its library loads from the folder (dynamic_library_path).
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'cari_bm25'")
        assert row.fetchone() == (
            extension.default_version(folder / "share/extension/cari_bm25.control"),
        )
        conn.execute("LOAD 'cari_bm25'")
        library = _show(conn, "dynamic_library_path")
    assert library == f"$libdir:{folder / 'lib'}"


@pytest.mark.skipif(not CAN_BUILD, reason="no gcc or make: the build falls back")
def test_a_build_is_reused_until_its_sources_change(
    tmp_path: Path, sources: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cari.db.extension")
    pg_config = embedded.client_tool("pg_config")
    (tmp_path / "data" / "ext" / ".build-killed" / "src").mkdir(parents=True)  # half a build
    first = extension.build(tmp_path / "data", pg_config)
    assert first is not None
    assert first.version == extension.default_version(sources / "cari_bm25.control")
    assert extension.build(tmp_path / "data", pg_config) == first
    assert _builds(caplog) == 1  # the second found it
    assert not (sources / "cari_bm25.o").exists()  # built in a copy, not in the sources

    with (sources / "cari_bm25.c").open("a") as file:
        file.write("\n/* changed */\n")
    second = extension.build(tmp_path / "data", pg_config)
    assert second is not None and second.folder != first.folder
    assert _builds(caplog) == 2
    # Only complete builds and the lock are left: no temporary folder, the killed one's neither.
    assert {p.name for p in (tmp_path / "data" / "ext").iterdir()} == {
        first.folder.name,
        second.folder.name,
        ".lock",
    }


@pytest.mark.skipif(not CAN_BUILD, reason="no gcc or make: the build falls back")
def test_two_processes_starting_at_once_build_once(
    tmp_path: Path, sources: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cari.db.extension")
    pg_config = embedded.client_tool("pg_config")
    built: list[Any] = []
    # Each thread opens the lock file itself, so they exclude each other as processes do.
    threads = [
        threading.Thread(target=lambda: built.append(extension.build(tmp_path, pg_config)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 2 and built[0] is not None and built[0] == built[1]
    assert _builds(caplog) == 1


def test_without_a_compiler_it_says_so_once_and_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    pg_config = embedded.client_tool("pg_config")
    assert extension.build(tmp_path / "data", pg_config) is None
    assert extension.build(tmp_path / "data", pg_config) is None
    [warning] = _warnings(caplog)
    assert "no C compiler found" in warning and "no-such-cc" in warning
    assert "apt-get install gcc make" in warning and "build-essential" in warning
    assert "SQL statement" in warning
    assert not any((tmp_path / "data" / "ext").glob("18-*"))


@pytest.mark.skipif(not CAN_BUILD, reason="no gcc or make: the build falls back")
def test_a_failed_build_says_why_once_and_leaves_nothing(
    tmp_path: Path, sources: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (sources / "cari_bm25.c").open("a") as file:
        file.write("\nint unused_and_unprototyped() { return 0 }\n")
    assert extension.build(tmp_path / "data", embedded.client_tool("pg_config")) is None
    [warning] = _warnings(caplog)
    assert "its build failed" in warning and "error:" in warning and "SQL statement" in warning
    # No half-built folder: the lock, and what was said (said once per data folder).
    ext = tmp_path / "data" / "ext"
    assert sorted(p.name for p in ext.iterdir()) == [".lock", "unbuildable.txt"]
    assert (ext / "unbuildable.txt").read_text() == warning


def test_readiness_and_metrics_name_the_engine(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        installed = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'cari_bm25'"
        ).fetchone()
    expected = ("cari_bm25", installed[0]) if installed else ("sql", None)
    if CAN_BUILD and _embedded_folder(dsn) is not None:
        assert expected[0] == "cari_bm25"  # the embedded server built and loaded it
    with app_client(dsn) as client:
        ready = client.get("/readyz").json()
        assert (ready["keyword_engine"], ready.get("keyword_engine_version")) == expected
        metrics = client.get("/metrics").text
    version = expected[1] or ""
    assert f'cari_keyword_engine{{engine="{expected[0]}",version="{version}"}} 1.0' in metrics

    with app_client(dsn, keyword_engine="sql") as client:  # forced, installed or not
        ready = client.get("/readyz").json()
    assert ready["keyword_engine"] == "sql" and "keyword_engine_version" not in ready


@pytest.mark.anyio
async def test_a_runtime_knows_its_engine_from_the_start(dsn: str) -> None:
    """What `explain` reports: asked when the runtime opens, kept for its life."""
    async with open_runtime(settings_for(dsn), dsn=dsn) as rt:
        engine = rt.keyword_engine.known
        assert engine is not None and engine == await rt.keyword_engine.current()
    if engine.name == "cari_bm25":
        assert str(engine) == f"cari_bm25 {engine.version}" and engine.version
    else:
        assert str(engine) == "sql" and engine.version is None


def test_a_fresh_embedded_server_without_a_compiler_serves_with_sql(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """The README's `cari serve` on a machine with no C compiler: one warning naming what to
    install, and keyword search on the SQL statement."""
    data_dir = data_dir_with_model(tmp_path / "data")
    env = {**clean_env, "CARI_DATA_DIR": str(data_dir), "CC": "/nonexistent/cc"}
    output: list[str] = []
    with serving(env, output=output) as base:
        status, ready = http("GET", f"{base}/readyz")
        assert (status, ready["keyword_engine"]) == (200, "sql")
    said = [line for line in output[0].splitlines() if "cari_bm25" in line]
    assert len(said) == 1, output[0]
    assert "no C compiler found" in said[0] and "apt-get install gcc make" in said[0]
    # Said once for the data folder: the next commands, which start the server again, do not
    # repeat it.
    again = run(["db", "url"], env)
    assert again.returncode == 0, again.stderr
    assert "cari_bm25" not in again.stderr, again.stderr
    run(["db", "stop"], env)
