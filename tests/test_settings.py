from pathlib import Path

import pytest

from cari.errors import ConfigError
from cari.settings import Settings, load_settings


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in ("DATABASE_URL", "CARI_DATABASE_URL", "CARI_API_KEYS", "CARI_PORT"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)


def test_defaults() -> None:
    settings = load_settings()
    assert settings.database_url is None
    assert (settings.host, settings.port) == ("127.0.0.1", 8000)
    assert (settings.hnsw_m, settings.hnsw_ef_construction) == (16, 64)
    assert settings.embedding_dimension == 384
    assert settings.api_keys == []


def test_environment_and_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("CARI_PORT=9001\nCARI_HNSW_M=24\n")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@db.example:5432/cari")
    monkeypatch.setenv("CARI_API_KEYS", "alpha, beta,,")
    settings = load_settings()
    assert settings.database_url == "postgresql://u@db.example:5432/cari"
    assert settings.port == 9001
    assert settings.hnsw_m == 24
    assert settings.api_keys == ["alpha", "beta"]


def test_exact_token_boosts_are_read_under_their_names_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CARI_INTENT_*_BOOST, the former names of CARI_EXACT_TOKEN_*_BOOST, are refused with the
    new name, not silently ignored."""
    monkeypatch.setenv("CARI_EXACT_TOKEN_KEYWORD_BOOST", "4")
    assert load_settings().exact_token_keyword_boost == 4.0
    assert load_settings(exact_token_vector_boost=0.75).exact_token_vector_boost == 0.75
    monkeypatch.setenv("CARI_EXACT_TOKEN_VECTOR_BOOST", "-1")
    with pytest.raises(ConfigError, match="CARI_EXACT_TOKEN_VECTOR_BOOST"):
        load_settings()
    monkeypatch.delenv("CARI_EXACT_TOKEN_VECTOR_BOOST")
    monkeypatch.setenv("CARI_INTENT_VECTOR_BOOST", "0.25")
    with pytest.raises(
        ConfigError,
        match="CARI_INTENT_VECTOR_BOOST is now CARI_EXACT_TOKEN_VECTOR_BOOST: rename it",
    ):
        load_settings()


def test_malformed_database_url_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://host:notaport/db")
    with pytest.raises(ConfigError, match=r"^invalid settings: DATABASE_URL: .*connection string"):
        load_settings()


def test_out_of_range_setting_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARI_HNSW_M", "1")
    with pytest.raises(ConfigError, match="CARI_HNSW_M"):
        load_settings()


def test_openai_embedder_needs_dimensions() -> None:
    settings = Settings(_env_file=None, embedder="openai")  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="CARI_EMBEDDING_DIMENSIONS"):
        _ = settings.embedding_dimension
    sized = Settings(_env_file=None, embedder="openai", embedding_dimensions=1536)  # type: ignore[call-arg]
    assert sized.embedding_dimension == 1536


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_needs_no_keys(host: str) -> None:
    load_settings().check_bind(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "example.org"])
def test_open_bind_is_refused_without_keys(host: str) -> None:
    with pytest.raises(ConfigError, match="CARI_API_KEYS"):
        load_settings().check_bind(host)
    load_settings(api_keys="k").check_bind(host)
    load_settings(allow_unauthenticated=True).check_bind(host)


def test_configuration_page_documents_every_setting() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    for field in Settings.model_fields:
        assert f"`CARI_{field.upper()}`" in page, field
