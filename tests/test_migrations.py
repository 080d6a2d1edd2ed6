"""Migrations on real PostgreSQL: up, down and up again; index parameters from settings."""

import asyncio
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from cari.db import migrations
from tests.conftest import settings_for

TABLES = {"collections", "documents", "chunks", "catalog_items", "financing_rates"}


def _tables(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    return {str(row[0]) for row in rows}


def _revision(dsn: str) -> str | None:
    async def read() -> str | None:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            return await migrations.current(conn)

    return asyncio.run(read())


def test_upgrade_downgrade_upgrade(empty_dsn: str) -> None:
    settings = settings_for(empty_dsn)
    assert _revision(empty_dsn) is None

    migrations.upgrade(empty_dsn, settings)
    assert _tables(empty_dsn) >= TABLES
    assert _revision(empty_dsn) == migrations.head()

    migrations.downgrade(empty_dsn, settings, "base")
    assert not TABLES & _tables(empty_dsn)
    assert _revision(empty_dsn) is None

    migrations.upgrade(empty_dsn, settings)
    assert _tables(empty_dsn) >= TABLES
    with psycopg.connect(empty_dsn) as conn:
        extensions = {str(r[0]) for r in conn.execute("SELECT extname FROM pg_extension")}
    assert {"vector", "pg_trgm"} <= extensions


def test_the_head_is_the_highest_numbered_file_and_alembics_own() -> None:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(migrations.ALEMBIC_DIR))
    assert migrations.head() == script.get_current_head()
    for revision in script.walk_revisions():  # each file is its number, after the one before
        assert revision.module.__file__ is not None
        number = Path(revision.module.__file__).name[:4]
        assert revision.revision == number
        assert revision.down_revision == (None if number == "0001" else f"{int(number) - 1:04d}")


def test_a_database_at_the_head_is_checked_without_alembic(dsn: str) -> None:
    """Every `cari` command checks the schema first: at the head it costs one query, not
    Alembic's and SQLAlchemy's imports."""
    checked = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from cari.db import migrations; from tests.conftest import settings_for;"
            f" migrations.upgrade({dsn!r}, settings_for({dsn!r}));"
            " print(sorted(m for m in sys.modules"
            " if m.split('.')[0] in ('alembic', 'sqlalchemy')))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert checked.stdout.strip() == "[]", checked.stderr


def test_index_parameters_and_dimension_come_from_settings(empty_dsn: str) -> None:
    settings = settings_for(
        empty_dsn,
        embedder="openai",
        embedding_dimensions=768,
        hnsw_m=24,
        hnsw_ef_construction=100,
    )
    migrations.upgrade(empty_dsn, settings)
    with psycopg.connect(empty_dsn) as conn:
        options = conn.execute(
            "SELECT reloptions FROM pg_class WHERE relname = 'chunks_embedding_vector_768_idx'"
        ).fetchone()
        column = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'"
        ).fetchone()
    assert options is not None and set(options[0]) == {"m=24", "ef_construction=100"}
    assert column == ("vector",)  # any width: each has its own index


def _embedding_storage(dsn: str) -> dict[str, str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT attrelid::regclass::text, attstorage FROM pg_attribute "
            "WHERE attname = 'embedding' AND attrelid IN ('chunks'::regclass, "
            "'catalog_items'::regclass)"
        ).fetchall()
    return {str(table): str(storage) for table, storage in rows}


def test_embeddings_stay_in_the_row_after_a_resize(empty_dsn: str) -> None:
    """MAIN storage (migration 0006), which a column's new type would reset to EXTERNAL."""
    migrations.upgrade(empty_dsn, settings_for(empty_dsn))
    assert _embedding_storage(empty_dsn) == {"chunks": "m", "catalog_items": "m"}

    wider = settings_for(empty_dsn, embedder="openai", embedding_dimensions=768)
    migrations.resize_embeddings(empty_dsn, wider)
    assert _embedding_storage(empty_dsn) == {"chunks": "m", "catalog_items": "m"}

    # A plain type change goes back to the type's EXTERNAL: why the resize sets MAIN again.
    with psycopg.connect(empty_dsn) as conn:
        conn.execute("ALTER TABLE chunks ALTER COLUMN embedding TYPE vector(3) USING NULL")
    assert _embedding_storage(empty_dsn)["chunks"] == "e"


def test_indonesian_query_stop_words_are_stemmed_by_the_server(empty_dsn: str) -> None:
    """Migration 0007 stems its word list with the server's own `indonesian`, so the rows are
    what that server makes of a query; words stemming like content words are not in it."""
    migrations.upgrade(empty_dsn, settings_for(empty_dsn))
    with psycopg.connect(empty_dsn) as conn:
        stop = {
            str(r[0])
            for r in conn.execute(
                "SELECT lexeme FROM query_stopwords WHERE language = 'indonesian'::regconfig"
            )
        }
        languages = {str(r[0]) for r in conn.execute("SELECT language FROM query_stopwords")}

        def lexemes(language: str, text: str) -> set[str]:
            rows = conn.execute(
                "SELECT lexeme FROM query_terms(%s::regconfig, %s)", (language, text)
            )
            return {str(r[0]) for r in rows}

        question = lexemes("indonesian", "Siapakah presiden pertama yang dimakamkan di Blitar?")
        english = lexemes("english", "Who was the first president buried in Blitar?")
    assert {"siapa", "apa", "mana", "yang", "di"} <= stop  # siapakah, berapakah, dimanakah
    assert not {"sebut", "dapat", "dia", "bagi", "tetap"} & stop  # disebut, mendapat, media…
    assert languages == {"indonesian"}
    assert question == {"presiden", "tama", "makam", "blitar"}  # pertama -> tama
    assert english == {"first", "presid", "buri", "blitar"}  # English's own stop words


@pytest.mark.parametrize("width", [2000, 2001, 3072, 4000])
def test_every_supported_width_migrates_from_empty(empty_dsn: str, width: int) -> None:
    """pgvector's HNSW indexes `vector` up to 2,000 dimensions: migration 0001's index over
    `vector(D)` failed from 2,001 on (`cari serve` on a fresh database exited 1). Wide
    embeddings get 0010's `halfvec` index, up and down and up again."""
    settings = settings_for(empty_dsn, embedder="openai", embedding_dimensions=width)
    migrations.upgrade(empty_dsn, settings)
    assert _revision(empty_dsn) == migrations.head()
    kind = "vector" if width < settings.halfvec_dimensions else "halfvec"
    assert _indexes(empty_dsn) == {
        f"chunks_embedding_{kind}_{width}_idx",
        f"catalog_items_embedding_{kind}_{width}_idx",
    }
    migrations.downgrade(empty_dsn, settings, "base")
    assert _revision(empty_dsn) is None
    migrations.upgrade(empty_dsn, settings)
    assert _revision(empty_dsn) == migrations.head()


def _indexes(dsn: str) -> set[str]:
    """The HNSW indexes of the embeddings."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid "
            "JOIN pg_am AS a ON a.oid = c.relam WHERE a.amname = 'hnsw'"
        ).fetchall()
    return {str(row[0]) for row in rows}
