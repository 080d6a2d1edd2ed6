"""`cari tune ef-search`: measure a collection's HNSW recall and latency per `ef_search`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click
import msgspec

from cari.cli.common import print_table, run, settings, user_errors
from cari.cli.evaluate import qrels_option, questions_option

if TYPE_CHECKING:
    from cari.runtime import Runtime
    from cari.schema.tune import EfSearchTuning, FusionConfig, FusionTuning


@click.group(help="Measure a collection on its own data and tune its settings.")
def tune() -> None:
    pass


@tune.command(
    "ef-search",
    help="Recall@k of the collection's HNSW index against the exact top k (a scan of every "
    "vector, in the same snapshot), and search latency, at each ef_search; recommends the "
    "smallest value reaching --recall. Questions from --questions FILE (one per line, a BEIR "
    'queries.jsonl, or a JSONL of {"query": ...}), else key-phrase questions made of --sample '
    "chunks of the collection (each one's rarest words). Runs as a batch job.",
)
@click.option("-c", "--collection", required=True, help="Collection to measure.")
@click.option(
    "--questions", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="FILE."
)
@click.option("--sample", type=int, help="Chunks drawn as questions without --questions [200].")
@click.option("--seed", type=int, help="Which chunks are drawn [0]: another seed, another set.")
@click.option("-k", "--k", "k", type=int, help="The k of recall@k [10].")
@click.option("--recall", type=float, help="The recall target [0.99].")
@click.option("--values", help="ef_search values, comma-separated [10,20,40,...,400].")
@click.option("--filter", "filters", help="Search filters as JSON, e.g. '{\"metadata\": {...}}'.")
@click.option("--apply", is_flag=True, help="Store the recommendation as the collection's own.")
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Also draw recall against latency per ef_search into FILE.svg.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@user_errors
def ef_search(
    collection: str,
    questions: Path | None,
    sample: int | None,
    seed: int | None,
    k: int | None,
    recall: float | None,
    values: str | None,
    filters: str | None,
    apply: bool,
    plot: Path | None,
    as_json: bool,
) -> None:
    from cari.errors import InvalidInput
    from cari.schema.tune import EfSearchTuneRequest
    from cari.tune import ef_search as tuning
    from cari.tune.questions import read_questions
    from cari.tune.requests import strictly

    try:
        measured = [int(v) for v in values.split(",")] if values else None
    except ValueError:
        raise InvalidInput("--values", "must be integers separated by commas") from None
    try:
        parsed = json.loads(filters) if filters else None
    except json.JSONDecodeError as exc:
        raise InvalidInput("--filter", f"is not JSON: {exc}") from None
    texts = [q.text for q in read_questions(questions)] if questions else None
    given = {
        "questions": texts,
        "sample": sample,
        "seed": seed,
        "k": k,
        "recall": recall,
        "values": measured,
        "filters": parsed,
        "apply": apply,
    }
    request = strictly({name: v for name, v in given.items() if v is not None}, EfSearchTuneRequest)

    async def work(rt: Runtime) -> EfSearchTuning:
        with _progress() as advance:
            return await tuning.tune(
                rt.pool, collection, request, rt.embedders, rt.settings, progress=advance
            )

    try:
        result = run(work, settings(), batch=True)
    except KeyboardInterrupt:
        click.echo("stopped: nothing was changed", err=True)
        raise SystemExit(130) from None
    if plot is not None:
        from cari.tune.plot import svg

        plot.write_text(svg(result), encoding="utf-8")
    if as_json:
        click.echo(msgspec.json.encode(result).decode())
    else:
        _print(result)


def _print(result: EfSearchTuning) -> None:
    if not result.points:
        click.echo(
            f"{result.collection}: no embedded chunk (within the filters): nothing to measure"
        )
        return
    source = "sampled chunks" if result.questions_from == "sample" else "questions given"
    click.echo(
        f"{result.collection}: recall@{result.k} against the exact top {result.k} on "
        f"{result.questions} {source}; the exact scan took {result.exact_p50_ms:.1f} ms (p50)"
    )
    print_table(
        ["ef_search", f"recall@{result.k} [95 %]", "p50 ms", "p95 ms", "plan", ""],
        [
            [
                str(p.ef_search),
                f"{p.recall:.4f} [{p.recall_low:.4f}, {p.recall_high:.4f}]",
                f"{p.p50_ms:.2f}",
                f"{p.p95_ms:.2f}",
                "HNSW index" if p.index_used else "exact scan",
                "← recommended" if p.ef_search == result.recommended else "",
            ]
            for p in result.points
        ],
    )
    whose = "its own" if result.current_source == "collection" else "the server default"
    now = f"its searches use {result.current} ({whose})"
    if not any(p.index_used for p in result.points):
        click.echo(
            "PostgreSQL read the collection exactly at every ef_search (it finds that cheaper "
            f"than the index at this size): nothing to tune yet; {now}"
        )
    elif result.recommended is None:
        click.echo(f"no value measured reaches recall {result.target}: try larger --values; {now}")
    elif result.applied:
        click.echo(f"applied: the collection's ef_search is now {result.recommended}")
    else:
        click.echo(
            f"recommended: ef_search {result.recommended} (recall ≥ {result.target}); {now}; "
            "--apply stores it"
        )


@tune.command(
    "fusion",
    help="Which fusion method and weights rank the collection's judged questions best: each "
    "method (zscore, minmax, rrf) at vector shares 0.1-0.9, and the collection's defaults, run "
    "as hybrid searches; the gain over the defaults is cross-validated (each fold scored with "
    "the configuration best on the others), with its 95 % bootstrap interval. --apply stores "
    "the best configuration only when that interval lies above zero. Questions and judgements "
    "as `cari eval` reads them. Runs as a batch job.",
)
@click.option("-c", "--collection", required=True, help="Collection to tune.")
@questions_option
@qrels_option
@click.option(
    "--folds",
    type=click.IntRange(2, 10),
    default=5,
    show_default=True,
    help="Cross-validation folds.",
)
@click.option("--apply", is_flag=True, help="Store the best, if its gain is beyond the noise.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@user_errors
def fusion(
    collection: str, questions: Path, qrels: Path | None, folds: int, apply: bool, as_json: bool
) -> None:
    from cari.tune import fusion as tuning
    from cari.tune.questions import read_judged

    judged = read_judged(questions, qrels)

    async def work(rt: Runtime) -> FusionTuning:
        with _progress() as advance:
            return await tuning.tune(
                rt.searcher, rt.pool, collection, judged, folds=folds, apply=apply, progress=advance
            )

    try:
        result = run(work, settings(), batch=True)
    except KeyboardInterrupt:
        click.echo("stopped: nothing was changed", err=True)
        raise SystemExit(130) from None
    if as_json:
        click.echo(msgspec.json.encode(result).decode())
        return
    click.echo(f"{result.collection}: nDCG@10 on {result.questions} judged questions")
    print_table(
        ["fusion", "nDCG@10"],
        [[_config(s.config), f"{s.ndcg_at_10:.4f}"] for s in [result.defaults, *result.best]],
    )
    click.echo(
        f"gain of tuning ({result.folds}-fold cross-validated): {result.gain:+.4f} "
        f"[{result.gain_low:+.4f}, {result.gain_high:+.4f}]"
    )
    best = _config(result.recommended)
    if result.applied:
        click.echo(f"applied: the collection's defaults are now {best}")
    elif result.gain_low > 0:
        click.echo(f"recommended: {best}; --apply stores it")
    else:
        click.echo(f"best here: {best}, but the gain is within the noise: the defaults stay")


def _config(config: FusionConfig | None) -> str:
    if config is None:
        return "the collection's defaults"
    return f"{config.method}, vector share {config.vector_share:.1f}"


@contextmanager
def _progress() -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr, gone when the work is done; yields what advances it."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("searches", total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)
