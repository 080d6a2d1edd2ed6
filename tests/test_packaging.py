"""Cari as a user installs it: the wheel built from the checkout, installed (not editable) in a
fresh virtual environment, serves, ingests and searches from there; and every package the code
imports is declared in pyproject.toml."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import sysconfig
import tomllib
import urllib.request
from importlib.metadata import distribution, packages_distributions
from pathlib import Path

from cari.db import extension
from tests.conftest import cli_env
from tests.fake_openai import FakeOpenAI
from tests.test_cli import http, serving

ROOT = Path(__file__).resolve().parents[1]


def _run(
    args: list[str | Path], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, f"{args}:\n{result.stdout}\n{result.stderr}"
    return result


def _install_wheel(tmp_path: Path) -> Path:
    """Build the checkout's wheel and install it alone in a new virtual environment: its `bin`.

    Installing the dependencies from the registry would take minutes, so the new environment
    sees this one's site-packages through a `.pth` file of plain paths. Python appends such a
    path to sys.path without reading the `.pth` files inside it, so this environment's editable
    `cari` (a `.pth` pointing at `service/`) stays out of reach: the test below checks it.
    """
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", wheels, ROOT])
    (wheel,) = wheels.glob("cari-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    _run([*pip, "--python", python, "install", "--no-deps", "--no-index", wheel])
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    Path(purelib.stdout.strip(), "dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    return venv / "bin"


def test_the_installed_wheel_serves_ingests_and_searches(
    tmp_path: Path, empty_dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    bin_dir = _install_wheel(tmp_path)
    env = cli_env(clean_env, empty_dsn, fake)
    env.pop("PYTHONPATH", None)
    work = tmp_path / "work"  # outside the checkout: nothing there to import or read
    work.mkdir()

    where = _run(
        [
            bin_dir / "python",
            "-c",
            "import json, sys, cari.db.queries, cari.db.migrations, cari.db.extension;"
            "print(json.dumps([cari.__file__, str(cari.db.queries.SQL_DIR),"
            " str(cari.db.migrations.ALEMBIC_DIR), str(cari.db.extension.sources()), sys.path]))",
        ],
        env=env,
        cwd=work,
    )
    module, sql, alembic, ext, path = json.loads(where.stdout)
    venv = bin_dir.parent
    assert Path(module).is_relative_to(venv), module
    assert Path(sql) == Path(module).parent / "sql" and Path(sql, "collection_get.sql").is_file()
    assert Path(alembic) == Path(module).parent / "alembic"
    # The keyword extension's sources, which the first start builds: the checkout's (and what
    # a developer's `make` left there, which the build neither copies nor hashes).
    assert Path(ext) == Path(module).parent / "ext" / "cari_bm25"
    tracked = _run(["git", "-C", ROOT, "ls-files", "ext/cari_bm25"]).stdout.split()
    shipped = {str(p.relative_to(ext)) for p in extension.source_files(Path(ext))}
    assert shipped == {str(Path(name).relative_to("ext/cari_bm25")) for name in tracked}
    assert str(ROOT / "service") not in path, path  # the editable install's .pth was not read
    # PEP 561: a user's type checker reads the client's (and every module's) annotations.
    assert (Path(module).parent / "py.typed").is_file()
    console = Path(module).parent / "console"  # the search console's page and scripts
    assert {"index.html", "home.html", "icon.svg", "console.js", "api.js", "render.js"} <= {
        file.name for file in console.iterdir()
    }

    # A database never migrated: the wheel's migrations create the schema when it serves.
    with serving(env, cari=[str(bin_dir / "cari")]) as base:
        status, _ = http("POST", f"{base}/v1/collections", {"name": "faq", "language": "english"})
        assert status == 201
        (work / "tires.md").write_text(
            "# Tires\n\nRotate the tires every ten thousand kilometres to keep the tread even.\n"
        )
        ingest = _run([bin_dir / "cari", "ingest", "tires.md", "-c", "faq"], env=env, cwd=work)
        assert "1 documents (1 new" in ingest.stderr, ingest.stderr
        status, body = http(
            "POST",
            f"{base}/v1/collections/faq/search",
            {"query": "rotate the tires to keep the tread even"},
        )
        assert status == 200, body
        results = body["results"]
        assert isinstance(results, list) and results, body
        assert results[0]["document_id"] == "tires.md"
        with urllib.request.urlopen(f"{base}/console/console.js", timeout=5) as script:
            assert script.read() == (console / "console.js").read_bytes()


# -- declared dependencies ---------------------------------------------------------------------

LOCAL = {"cari", "tests", "bench"}


def _declared(requirements: list[str]) -> set[str]:
    """Distribution names (normalised) of requirement strings such as `psycopg[binary]>=3.2`."""
    names = (re.match(r"[A-Za-z0-9._-]+", requirement) for requirement in requirements)
    return {_normalise(name.group()) for name in names if name}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_distributions(*folders: str) -> dict[str, str]:
    """Each third-party module imported under `folders` → its installed distribution."""
    imports: set[tuple[str, ...]] = set()  # per statement: the modules it may name, longest first
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    imports |= {(alias.name,) for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    # `from opentelemetry import trace` imports a module of a namespace package.
                    module = node.module
                    imports |= {(f"{module}.{alias.name}", module) for alias in node.names}
    installed = packages_distributions()
    found = {}
    for names in imports:
        top = names[0].partition(".")[0]
        if top not in sys.stdlib_module_names and top not in LOCAL:
            module, name = _distribution(names, installed.get(top, []))
            found[module] = name
    return found


def _distribution(names: tuple[str, ...], candidates: list[str]) -> tuple[str, str]:
    """The first of `names` (dotted) that one of the `candidates` installed, and that one. A
    namespace package (`opentelemetry`) has many: the one holding the module's files."""
    if len(candidates) == 1:
        return names[-1], _normalise(candidates[0])
    for name in names:
        stem = name.replace(".", "/")
        for candidate in candidates:
            files = {str(file) for file in distribution(candidate).files or []}
            if {f"{stem}.py", f"{stem}/__init__.py"} & files:
                return name, _normalise(candidate)
    return names[-1], "not installed"


def test_every_imported_package_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    runtime = _declared(project["dependencies"])
    optional = _declared(extras["otel"]) | _declared(extras["langchain"])
    test = runtime | _declared(extras["test"]) | optional  # the test extra includes both
    # What the wheel runs (the package and its migrations) needs only the runtime dependencies,
    # the `otel` extra for traces (`cari.observability.tracing` imports it only when asked for
    # traces) and the `langchain` extra for `cari.langchain`.
    shipped = _imported_distributions("service/cari", "alembic")
    assert {"rich", "msgspec", "anyio", "httpx", "sqlalchemy"} <= set(shipped.values())
    assert {"opentelemetry-api", "opentelemetry-sdk", "langchain-core"} <= set(shipped.values())
    missing = {module: name for module, name in shipped.items() if name not in runtime | optional}
    assert not missing, f"imported but not in [project].dependencies or an extra: {missing}"
    missing = {
        module: name
        for module, name in _imported_distributions("tests", "bench").items()
        if name not in test
    }
    assert not missing, f"imported by tests or benchmarks but not declared: {missing}"
