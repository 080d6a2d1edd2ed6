"""compose.yaml cannot run here (no Docker engine); check that what it says matches the code."""

from pathlib import Path
from typing import Any

import yaml

from cari.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return data


def _setting_env_names() -> set[str]:
    names = {f"CARI_{name.upper()}" for name in Settings.model_fields}
    return names | {"DATABASE_URL"}


def test_database_is_pgvector_with_healthcheck() -> None:
    db = _compose()["services"]["db"]
    assert db["image"].startswith("pgvector/pgvector:")
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])


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


def test_image_serves_the_project() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install" in dockerfile and '"cari", "serve"' in dockerfile
