"""`cari search` and `cari ask`: the search pipeline and cited answers, in the terminal."""

from __future__ import annotations

import html
import json
import re
from typing import TYPE_CHECKING, Any

import click
import msgspec

from cari.cli.common import choice, float_range, int_range, run, user_errors
from cari.limits import Method, Mode, Threshold, TopK

if TYPE_CHECKING:
    from rich.text import Text

    from cari.runtime import Runtime
    from cari.schema.search import SearchResponse, SearchResult


# The console's colours: the bands of cari.search.relevance.
BAND_STYLES = {"strong": "green", "moderate": "yellow", "weak": "red"}


@click.command(help="Search a collection.")
@click.argument("query")
@click.option("-c", "--collection", required=True, help="Collection to search.")
@click.option("--mode", type=choice(Mode), help="Search mode.")
@click.option("--fusion", type=choice(Method), help="How hybrid fuses the lists.")
@click.option("--top-k", type=int_range(TopK), help="Results to return.")
@click.option(
    "--threshold",
    type=float_range(Threshold),
    help="Least relevance (0-1) a result needs; unset: the collection's search threshold, "
    "none by default (the top k ranked, each with its band).",
)
@click.option(
    "--no-decompose", is_flag=True, help="Search the question whole, even if it compares things."
)
@click.option("--rerank", is_flag=True, help="Reorder the results with the configured reranker.")
@click.option("--explain", is_flag=True, help="Show the plan and per-stage timings.")
@click.option("--json", "as_json", is_flag=True, help="Print the response as JSON.")
@click.option(
    "--sql",
    "show_sql",
    is_flag=True,
    help="Print the keyword and vector statements the search ran, parameters filled in, ready "
    "for psql (EXPLAIN (ANALYZE, BUFFERS) them), instead of the results.",
)
@user_errors
def search(
    query: str,
    collection: str,
    mode: Mode | None,
    fusion: Method | None,
    top_k: int | None,
    threshold: float | None,
    no_decompose: bool,
    rerank: bool,
    explain: bool,
    as_json: bool,
    show_sql: bool,
) -> None:
    import msgspec

    from cari.db import statements
    from cari.schema.search import SearchRequest

    request = SearchRequest(
        query=query,
        mode=mode,
        fusion=fusion,
        top_k=top_k,
        threshold=threshold,
        decompose=not no_decompose,
        rerank=rerank,
        explain=explain,
    )

    async def work(rt: Runtime) -> SearchResponse:
        return await rt.searcher.search(collection, request)

    async def ran(rt: Runtime) -> list[str]:
        with statements.recording() as executed:
            await rt.searcher.search(collection, request)
        async with rt.pool.connection() as conn:
            found = [(name, s) for s in executed if (name := statements.named(s, conn))]
            # The lexemes, keyword, then vector (they ran side by side, in either order).
            found.sort(key=lambda pair: statements.SEARCH_STATEMENTS.index(pair[0]))
            return [
                f"-- {name} (sql/{name}.sql)\n{_session(name, rt)}{statements.for_psql(s, conn)}"
                for name, s in found
            ]

    if show_sql:
        click.echo("\n\n".join(run(ran)))
        return
    response = run(work)
    if as_json:
        click.echo(msgspec.json.encode(response).decode())
    else:
        _print_results(response)


def _session(name: str, rt: Runtime) -> str:
    """The settings Cari's connections run a vector search with (cari.runtime.make_pool)."""
    if name != "search_vector":
        return ""
    ef_search = rt.settings.hnsw_ef_search
    return f"SET hnsw.ef_search = {ef_search};\nSET hnsw.iterative_scan = strict_order;\n"


@click.command(help="Answer a question from a collection, citing its sources [1], [2], ...")
@click.argument("question")
@click.option("-c", "--collection", required=True, help="Collection to answer from.")
@click.option("--top-k", type=int_range(TopK), help="Sources to answer from.")
@click.option(
    "--threshold",
    type=float_range(Threshold),
    help="Least relevance (0-1) a source needs; unset: the collection's threshold.",
)
@click.option("--no-rerank", is_flag=True, help="Skip the configured reranker.")
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON Lines.")
@user_errors
def ask(
    question: str,
    collection: str,
    top_k: int | None,
    threshold: float | None,
    no_rerank: bool,
    as_json: bool,
) -> None:
    """Print the answer as it is written, then its numbered sources (or the events as JSON
    Lines, one per event)."""
    from cari.schema.answer import AnswerRequest, Citations, Failed, LLMChunk, Metadata

    request = AnswerRequest(query=question, top_k=top_k, threshold=threshold, rerank=not no_rerank)

    async def work(rt: Runtime) -> None:
        prepared = await rt.answerer.prepare(collection, request)
        async for event in rt.answerer.events(prepared):
            data = event.data
            if as_json:
                click.echo(json.dumps({"event": event.name, "data": msgspec.to_builtins(data)}))
            elif isinstance(data, LLMChunk):
                click.echo(data.text, nl=False)
            elif isinstance(data, Citations):
                click.echo()
                for number, cited in data.citations.items():
                    where = cited.document_id or cited.id
                    click.echo(f"[{number}] {cited.title or where} ({where})")
            elif isinstance(data, Metadata):
                for warning in data.warnings:
                    click.echo(f"warning: {warning}", err=True)
            elif isinstance(data, Failed):
                raise click.ClickException(data.message)

    run(work)


def _print_results(response: SearchResponse) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    if len(response.sub_queries) > 1:
        click.echo("sub-queries: " + " | ".join(response.sub_queries))
    if response.routes != ["knowledge"]:
        click.echo("routes: " + ", ".join(response.routes))
    table = Table(show_lines=False)
    for column in ("#", "relevance", "score", "id", "source", "title", "text"):
        table.add_column(column, overflow="fold")
    for rank, result in enumerate(response.results, 1):
        table.add_row(
            str(rank),
            Text(f"{result.relevance:.2f} {result.band}", style=BAND_STYLES[result.band]),
            f"{result.score:.4f}",
            result.document_id or result.id,
            result.source or "",
            result.title,
            _passage(result),
        )
    console.print(table)
    if not response.results:
        click.echo("no result (passing the threshold, when one was asked)", err=True)
    for warning in response.warnings:
        click.echo(f"warning: {warning}", err=True)
    if response.explain is not None:
        _print_explain(msgspec.to_builtins(response.explain))


def _print_explain(explain: dict[str, Any]) -> None:
    """The plan as tables: its settings, each sub-query's weighed chunks, the timings (the
    JSON is `--json`'s)."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    plan = Table(title="plan", show_header=False)
    plan.add_column(overflow="fold")
    plan.add_column(overflow="fold")
    for key, value in explain.items():
        if key == "decomposition":
            plan.add_row(_label(key), _decomposition(value))
        elif key not in ("sub_queries", "timings_ms"):
            plan.add_row(_label(key), _plain(value))
    console.print(plan)
    parts = explain.get("sub_queries", [])
    for part in parts:
        chunks = Table(title=f"sub-query: {part['query']}")
        shown = ("relevance", "cosine", "dense", "coverage", "specificity", "lexical")
        for column in ("id", *shown, "outcome"):
            chunks.add_column(column, overflow="fold")
        weighed = [(c, "kept") for c in part["kept"]]
        weighed += [(c, f"dropped: {c['reason']}") for c in part["dropped"]]
        for chunk, outcome in weighed:
            evidence = [_plain(chunk[k]) for k in shown]
            chunks.add_row(chunk["id"], *evidence, outcome)
        console.print(chunks)
        keys = ["candidates", "keyword_postings_read", "query_vector_cached", "routes"]
        if part.get("embedded_query") not in (None, part["query"]):  # respelled: typos
            keys.append("embedded_query")
        for key in keys:
            click.echo(f"{_label(key)}: {_plain(part[key])}")
        if len(parts) > 1:  # one sub-query's timings are the search's, in the table below
            click.echo(f"{_label('timings_ms')}: {_plain(part['timings_ms'])}")
    timings = Table(title=_label("timings_ms"))
    timings.add_column("stage")
    timings.add_column("ms", justify="right")
    for stage, ms in explain.get("timings_ms", {}).items():
        timings.add_row(stage, f"{ms:.1f}")
    console.print(timings)


def _decomposition(decomposition: dict[str, Any]) -> str:
    """`split by "vs" into: a; b`, or why the question was searched whole."""
    parts = decomposition["sub_queries"]
    if len(parts) > 1:
        return f'split by "{decomposition["pattern"]}" into: {"; ".join(parts)}'
    if decomposition["kept_whole_because"]:
        return f"searched whole: {decomposition['kept_whole_because']}"
    return "searched whole: nothing to split"


def _label(key: str) -> str:
    return key.removesuffix("_ms").replace("_", " ") + (" (ms)" if key.endswith("_ms") else "")


def _plain(value: object) -> str:
    """A value of the plan as words: `vector 1, keyword 1`, not JSON."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        if not value:
            return "none"
        return ", ".join(
            f"{_label(str(k))} ({_plain(v)})"
            if isinstance(v, dict)
            else f"{_label(str(k))} {_plain(v)}"
            for k, v in value.items()
        )
    if isinstance(value, list):
        return "; ".join(_plain(item) for item in value) if value else "none"
    return str(value)


def _passage(result: SearchResult) -> Text:
    """A chunk's highlight, its matches in bold; another source's first 160 characters."""
    from rich.text import Text

    if result.highlight is None:
        text = " ".join(result.content.split())
        return Text(text[:160] + ("…" if len(text) > 160 else ""))
    passage = Text()
    for index, part in enumerate(re.split("<mark>|</mark>", result.highlight)):
        passage.append(html.unescape(part), style="bold" if index % 2 else "")
    return passage
