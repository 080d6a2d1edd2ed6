"""`cari eval`: a collection's ranking quality on judged questions, per search mode."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast, get_args

import click

from cari.cli.common import int_range, print_table, run, user_errors
from cari.limits import EvalMode, RecallDepth, choices

if TYPE_CHECKING:
    from cari.runtime import Runtime
    from cari.schema.evaluate import EvalReport, Figure
    from cari.tune.questions import Judged

MODES = ",".join(choices(EvalMode))
EXISTING = click.Path(exists=True, dir_okay=False, path_type=Path)
# The judged questions' options, `cari eval`'s and `cari tune fusion`'s.
questions_option = click.option(
    "--questions",
    required=True,
    type=EXISTING,
    help='BEIR queries.jsonl ({"_id", "text"} a line), JSON Lines of {"query", "relevant": '
    '[ids], "id"?}, or text with one question a line.',
)
qrels_option = click.option(
    "--qrels",
    type=EXISTING,
    help="BEIR judgements (qrels/*.tsv: query-id, corpus-id, score). Without: each line's "
    '"relevant".',
)


@click.command(
    "eval",
    short_help="Measure a collection's ranking on judged questions, per search mode.",
    help="Measure a collection's ranking on judged questions, per search mode: nDCG@10, "
    "Recall@k and MRR@10 (means over the questions, each with its 95 % bootstrap interval), "
    "the latency of a search, and the questions where hybrid ranks worse than keyword or vector "
    "alone.",
)
@click.option("-c", "--collection", required=True, help="Collection to measure.")
@questions_option
@qrels_option
@click.option(
    "--k", type=int_range(RecallDepth), default=100, show_default=True, help="Depth of Recall@k."
)
@click.option(
    "--modes",
    default=MODES,
    show_default=True,
    help="Modes to measure, comma-separated; default is the collection's own (no mode set).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@user_errors
def evaluate(
    collection: str, questions: Path, qrels: Path | None, k: int, modes: str, as_json: bool
) -> None:
    import msgspec

    from cari.tune.questions import read_judged

    chosen = _modes(modes)
    judged = read_judged(questions, qrels)

    async def work(rt: Runtime) -> EvalReport:
        return await _measure(rt, collection, judged, k, chosen)

    try:
        report = run(work, batch=True)
    except KeyboardInterrupt:  # as a shell reports a command Ctrl-C ended
        click.echo("\nstopped", err=True)
        raise SystemExit(130) from None
    if as_json:
        click.echo(msgspec.json.encode(report).decode())
    else:
        _print_report(report)
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)


def _modes(text: str) -> list[EvalMode]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in get_args(EvalMode)]
    if unknown or not names:
        raise click.BadParameter(f"use some of {MODES}", param_hint="--modes")
    return [cast(EvalMode, name) for name in names]


async def _measure(
    rt: Runtime, collection: str, judged: list[Judged], k: int, modes: list[EvalMode]
) -> EvalReport:
    """The evaluation, with a bar of the questions done on stderr."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from cari.tune.evaluate import evaluate

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("questions"),
        console=Console(stderr=True),
    ) as progress:
        task = progress.add_task(f"eval → {collection}", total=len(judged))
        return await evaluate(
            rt.searcher,
            collection,
            judged,
            k=k,
            modes=modes,
            progress=lambda done: progress.update(task, completed=done),
        )


def _print_report(report: EvalReport) -> None:
    click.echo(
        f"{report.collection}: {report.questions} judged questions; "
        "means over them, and below each its 95 % bootstrap interval"
    )
    print_table(
        ("mode", "nDCG@10", f"Recall@{report.k}", "MRR@10", "p50 ms", "p95 ms"),
        [
            (
                m.mode,
                _figure(m.ndcg_at_10),
                _figure(m.recall_at_k),
                _figure(m.mrr_at_10),
                f"{m.latency.p50_ms:.1f}",
                f"{m.latency.p95_ms:.1f}",
            )
            for m in report.modes
        ],
    )
    if report.hybrid_losses:
        click.echo("where hybrid ranks worse than keyword or vector alone (nDCG@10), worst first:")
        print_table(
            ("id", "question", "hybrid", "keyword", "vector"),
            [
                (
                    loss.id,
                    loss.query,
                    f"{loss.hybrid:.3f}",
                    f"{loss.keyword:.3f}",
                    f"{loss.vector:.3f}",
                )
                for loss in report.hybrid_losses
            ],
        )


def _figure(figure: Figure) -> str:
    return f"{figure.mean:.3f}\n{figure.low:.3f}-{figure.high:.3f}"
