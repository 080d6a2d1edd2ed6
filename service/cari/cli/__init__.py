"""The `cari` command: the group, and the commands by subject in the modules beside this one.
Each command validates its options, calls the core in a runtime and reports; a user error is
one line and exit status 1 (`common.user_errors`)."""

from __future__ import annotations

import click

from cari.cli import (
    bm25,
    catalog,
    documents,
    evaluate,
    keys,
    relevance,
    search,
    server,
    synonyms,
    tune,
)


@click.group(help="Cari: hybrid search and RAG where all retrieval lives in PostgreSQL.")
@click.version_option(package_name="cari")
def main() -> None:
    pass


for command in (
    server.serve,
    server.mcp,
    server.migrate,
    server.db_group,
    documents.ingest,
    documents.reembed,
    relevance.refit,
    search.search,
    search.ask,
    evaluate.evaluate,
    bm25.bm25,
    synonyms.synonyms,
    catalog.catalog,
    catalog.rates,
    keys.keys,
    tune.tune,
):
    main.add_command(command)
