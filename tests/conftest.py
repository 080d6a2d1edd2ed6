"""A real PostgreSQL for every test, from one place.

The server is `CARI_TEST_DATABASE_URL` if set, else a `pgvector/pgvector` container when a Docker
engine answers, else the embedded server. Each test gets its own database, cloned from a template
that was migrated once per session, so tests stay independent and fast.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from litestar.testing import TestClient
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cari.api.app import create_app
from cari.db import embedded, migrations
from cari.settings import LOCAL_EMBEDDING_DIMENSION, Settings
from tests.fake_llm import FakeLLM
from tests.fake_openai import FakeOpenAI

# The local model's OpenMP threads wait for each other between steps. On a machine busier than
# its cores (CI at load 8) a waiting thread is descheduled in turn and one query embedding goes
# from ~10 ms to ~500 ms (one test took 47.8 s instead of 4.3 s): there the model runs on one
# thread, which never waits (60 ms at load 8). On an idle machine one thread would make the suite
# ~15 % slower, so it keeps its threads, which spin briefly and then sleep (cari.embed). Decided
# before the model is loaded (on first use) and inherited by the `cari` subprocesses; a value
# given from outside wins. Under pytest-xdist (scripts/test runs two workers) the workers share
# the cores the same way, so each runs the model on one thread.
BUSY = os.getloadavg()[0] > (os.cpu_count() or 1) or "PYTEST_XDIST_WORKER" in os.environ
if BUSY:
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# The server a Docker engine runs for the tests: compose's database image before Cari's
# extension is built into it (tests/test_compose.py holds the two together).
DOCKER_IMAGE = (
    "pgvector/pgvector:0.8.6-pg18-bookworm"
    "@sha256:2ba9ca5f2e7daa0f0e7723cba1ee9167bab54efd3640516a44ac1a928dd67e7a"
)

TEMPLATE = f"cari_template_{os.getpid()}"
_numbers = itertools.count()


def _docker_answers() -> bool:
    # Without an engine the Docker SDK leaks a socket while failing; look before asking.
    if not os.environ.get("DOCKER_HOST") and not Path("/var/run/docker.sock").exists():
        return False
    import docker

    try:
        client = docker.from_env(timeout=3)
    except docker.errors.DockerException:
        return False
    with contextlib.closing(client):
        try:
            return bool(client.ping())
        except docker.errors.DockerException:
            return False


@pytest.fixture(scope="session")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """DSN of a PostgreSQL server with pgvector, for the whole session."""
    if url := os.environ.get("CARI_TEST_DATABASE_URL"):
        yield url
    elif _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer(DOCKER_IMAGE, driver=None) as container:
            yield container.get_connection_url()
    else:
        # Stopped at interpreter exit by the embedded server's own handle.
        url = embedded.start(tmp_path_factory.mktemp("embedded"))
        _without_durability(url)
        yield url


# What a test server may skip: it is thrown away at the session's end, never recovered after a
# crash. Each test's CREATE DATABASE and each commit otherwise wait for the disk (CREATE
# DATABASE ... TEMPLATE 0.17 s instead of 0.07). The tests of durability itself start servers
# of their own, with Cari's defaults (tests/test_faults.py, tests/test_replicas.py).
NOT_DURABLE = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def _without_durability(url: str) -> None:
    """The session's embedded server without the disk waits of `NOT_DURABLE` (all three apply
    at a reload; ALTER SYSTEM writes them into this server's own data folder alone)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for name, value in NOT_DURABLE.items():
            statement = sql.SQL("ALTER SYSTEM SET {} = {}")
            conn.execute(statement.format(sql.Identifier(name), sql.Literal(value)))
        conn.execute("SELECT pg_reload_conf()")


def database_dsn(server_url: str, name: str) -> str:
    return make_conninfo(server_url, dbname=name)


def settings_for(dsn: str, **overrides: object) -> Settings:
    """Settings for a test: pointed at `dsn`, nothing read from the developer's `.env`."""
    return Settings(_env_file=None, database_url=dsn, **overrides)  # type: ignore[call-arg]


def app_client(dsn: str, fake: FakeOpenAI | None = None, **overrides: Any) -> TestClient[Any]:
    """The HTTP app on `dsn`; with `fake`, embeddings come from that local server. No
    background re-embedding and no retries unless a test asks for them."""
    values: dict[str, Any] = {"reembed_interval_s": 0, "embedding_max_retries": 0}
    if fake is not None:
        values.update(fake.settings())
    values.update(overrides)
    return TestClient(create_app(settings_for(dsn, **values), dsn))


def data_dir_with_model(data_dir: Path) -> Path:
    """A new CARI_DATA_DIR whose `models` is the default data folder's, where the local model is
    converted once for the whole run: a first start converts it (10-60 s), which only the tests
    of the first start need to wait for."""
    from cari.e5 import convert
    from cari.settings import default_data_dir

    convert.prepared(default_data_dir())  # under a lock: once, whichever worker is first
    data_dir.mkdir(parents=True)
    (data_dir / "models").symlink_to(default_data_dir() / "models", target_is_directory=True)
    return data_dir


def cli_env(clean_env: dict[str, str], dsn: str, fake: FakeOpenAI) -> dict[str, str]:
    """Environment for a `cari` subprocess on `dsn`, embedding through `fake`."""
    env = {**clean_env, "DATABASE_URL": dsn, "CARI_EMBEDDING_MAX_RETRIES": "0"}
    env.update({f"CARI_{k.upper()}": str(v) for k, v in fake.settings().items()})
    return env


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    """A local OpenAI-compatible chat server and Cohere-compatible reranker."""
    with FakeLLM() as server:
        yield server


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    """A local OpenAI-compatible embedding server as wide as the migrated columns."""
    with FakeOpenAI(dimension=LOCAL_EMBEDDING_DIMENSION) as server:
        yield server


def _admin(server_url: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(server_url, autocommit=True)


@pytest.fixture(scope="session")
def template(server_url: str) -> Iterator[str]:
    with _admin(server_url) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(TEMPLATE)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE)))
    dsn = database_dsn(server_url, TEMPLATE)
    migrations.upgrade(dsn, settings_for(dsn))
    yield TEMPLATE
    with _admin(server_url) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(TEMPLATE))
        )


def _fresh_database(server_url: str, template: str | None) -> Iterator[str]:
    name = f"cari_test_{os.getpid()}_{next(_numbers)}"
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        create += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    with _admin(server_url) as conn:
        conn.execute(create)
    yield database_dsn(server_url, name)
    with _admin(server_url) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def dsn(server_url: str, template: str) -> Iterator[str]:
    """A fresh, migrated database of this test's own."""
    yield from _fresh_database(server_url, template)


@pytest.fixture(scope="module")
def module_dsn(server_url: str, template: str) -> Iterator[str]:
    """A fresh, migrated database shared by one test module's read-only tests."""
    yield from _fresh_database(server_url, template)


@pytest.fixture
def empty_dsn(server_url: str) -> Iterator[str]:
    """A fresh database that was never migrated."""
    yield from _fresh_database(server_url, None)


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    from pgvector.psycopg import register_vector

    with psycopg.connect(dsn, autocommit=True) as connection:
        register_vector(connection)
        yield connection


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Environment for a `cari` subprocess: no inherited Cari, database or tracing settings;
    batch jobs at the test run's own priority (`test_cli.py` tests the default, without it):
    at niceness 19, in an autogroup of their own, a busy machine starves them, and a test of 6
    ingests that takes 9 s idle took 157 s at load 6."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CARI_", "OTEL_")) and key != "DATABASE_URL"
    }
    env["CARI_BATCH_NICENESS"] = "0"
    monkeypatch.chdir(tmp_path)  # so no developer `.env` is picked up
    return env


@pytest.fixture(scope="module")
def base_url(module_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A `cari serve` subprocess on the module's database, embedding through a local fake, for
    a module's tests (each working in collections of its own): its base URL."""
    from tests.test_cli import serving

    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CARI_", "OTEL_")) and key != "DATABASE_URL"
    }
    with (
        FakeOpenAI(dimension=LOCAL_EMBEDDING_DIMENSION) as fake,
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.chdir(tmp_path_factory.mktemp("serve"))  # no developer `.env` is read
        with serving(cli_env(env, module_dsn, fake)) as url:
            yield url


def pytest_report_header() -> str:
    source = (
        "CARI_TEST_DATABASE_URL"
        if os.environ.get("CARI_TEST_DATABASE_URL")
        else "testcontainers or embedded"
    )
    threads = os.environ.get("OMP_NUM_THREADS", "OpenMP's default")
    load = f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    return f"cari: PostgreSQL from {source}; local model threads: {threads} ({load})"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each API operation's schemathesis test gets its operation in its node id. schemathesis
    names them `test[GET /path]`, but pytest 9.2 ids a test without parameters by its function
    alone: the 26 shared one node id, and pytest-xdist, which schedules by node id, ran one of
    them under `scripts/test` (tests/test_openapi_conformance.py). schemathesis itself sets the
    private id the same way (pytest 9.2 keeps it parsed, as `_id`; earlier, `_nodeid`)."""
    for item in items:
        label = getattr(item, "operation_label", None)
        if label is None or item.nodeid.endswith(f"[{label}]"):
            continue
        unique = f"{item.nodeid}[{label}]"
        if hasattr(item, "_id"):
            item._id = type(item._id).parse(unique)
        else:
            item._nodeid = unique
    shared = sorted(nodeid for nodeid, n in Counter(i.nodeid for i in items).items() if n > 1)
    if shared:
        raise pytest.UsageError(f"tests sharing a node id (xdist runs one of each): {shared}")


_bench_templates: dict[tuple[str, str], str] = {}


@pytest.fixture
def bench_databases(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmarks' fresh databases (`bench.harness.fresh_database`) cloned from one migrated
    once per server and settings, not migrated anew: the migrations take ~9 s (0019's word
    list) and bench.ingest_path alone asks for six databases. The same settings migrate to the
    same database; the clones are dropped with the session's server (or left, like the
    benchmarks' own databases, on CARI_TEST_DATABASE_URL's)."""
    from bench import bulk_isolation, harness, ingest_path

    migrate = harness.fresh_database

    def fresh_database(name: str, settings: Settings) -> str:
        server = harness.server_dsn(settings)
        key = (make_conninfo(server, dbname=""), settings.model_dump_json(exclude={"database_url"}))
        if key not in _bench_templates:
            template = f"cari_bench_template_{os.getpid()}_{len(_bench_templates)}"
            migrate(template, settings)
            _bench_templates[key] = template
        with _admin(server) as conn:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            conn.execute(drop.format(sql.Identifier(name)))
            create = sql.SQL("CREATE DATABASE {} TEMPLATE {}")
            conn.execute(create.format(sql.Identifier(name), sql.Identifier(_bench_templates[key])))
        return database_dsn(server, name)

    for module in (harness, bulk_isolation, ingest_path):
        monkeypatch.setattr(module, "fresh_database", fresh_database)
