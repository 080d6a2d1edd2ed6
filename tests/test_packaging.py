"""Every package the code imports is declared in pyproject.toml."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCAL = {"cari", "tests", "bench"}


def _declared(requirements: list[str]) -> set[str]:
    """Distribution names (normalised) of requirement strings such as `psycopg[binary]>=3.2`."""
    names = (re.match(r"[A-Za-z0-9._-]+", requirement) for requirement in requirements)
    return {_normalise(name.group()) for name in names if name}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_distributions(*folders: str) -> dict[str, str]:
    """Each third-party module imported under `folders` → its installed distribution."""
    modules: set[str] = set()
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    modules |= {alias.name.partition(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    modules.add(node.module.partition(".")[0])
    installed = packages_distributions()
    third_party = modules - set(sys.stdlib_module_names) - LOCAL
    return {
        module: _normalise(installed.get(module, ["not installed"])[0]) for module in third_party
    }


def test_every_imported_package_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = _declared(project["dependencies"])
    test = runtime | _declared(project["optional-dependencies"]["test"])
    # What the wheel runs (the package and its migrations) needs only the runtime dependencies.
    shipped = _imported_distributions("service/cari", "alembic")
    assert {"rich", "msgspec", "anyio", "httpx", "sqlalchemy"} <= set(shipped.values())
    missing = {module: name for module, name in shipped.items() if name not in runtime}
    assert not missing, f"imported but not in [project].dependencies: {missing}"
    missing = {
        module: name
        for module, name in _imported_distributions("tests", "bench").items()
        if name not in test
    }
    assert not missing, f"imported by tests or benchmarks but not declared: {missing}"
