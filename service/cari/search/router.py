"""The router: which sources a question needs besides the documents.

`knowledge` (the documents) always; `pricing` and `financing` when the question holds one of
the collection's keywords for them (EN and ID lists by default, configurable per collection);
`specs` when the question asks about a product's attributes. Specs questions are too varied for
a word list ("what material is it made of?", "does it support Bluetooth?", "berapa
dimensinya?"), so they are recognised by meaning: the query embedding is compared with example
questions of each kind, and the question routes to specs when its nearest examples are specs
questions. A few unmistakable words ("spesifikasi", "specs") route it too, also in keyword mode
where no query embedding exists. Several routes may hold at once.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from cari.concurrency import all_or_none
from cari.embed import Embedder

Route = Literal["knowledge", "pricing", "specs", "financing"]

SPECS_KEYWORDS = (
    "spesifikasi", "spek", "spec", "specs", "specification", "specifications", "fitur",
    "features", "dimensi", "dimensions",
)  # fmt: skip

# Questions about a product's attributes, for any kind of product, and questions that are not
# (about prices and payments too: those have their own routes).
SPECS_EXAMPLES = (
    "what are the specifications?",
    "what material is it made of?",
    "does it support Bluetooth?",
    "what are the dimensions and weight?",
    "how big is the engine?",
    "what colours does it come in?",
    "how long does the battery last?",
    "is it waterproof?",
    "how many seats does it have?",
    "what is the screen size and resolution?",
    "apa spesifikasinya?",
    "terbuat dari bahan apa?",
    "apakah mendukung bluetooth?",
    "berapa dimensinya?",
    "berapa kapasitas mesinnya?",
    "ada warna apa saja?",
    "berapa lama daya tahan baterainya?",
    "apakah tahan air?",
    "berapa jumlah kursinya?",
    "fiturnya apa saja?",
)
OTHER_EXAMPLES = (
    "how do I reset my password?",
    "what is the return policy?",
    "where is the nearest store?",
    "who founded the company?",
    "when was it first released?",
    "why does my order show as pending?",
    "what is the history of the city?",
    "how do I contact customer service?",
    "what does the warranty cover?",
    "what causes the disease?",
    "bagaimana cara mengembalikan barang?",
    "di mana lokasi toko terdekat?",
    "siapa pendiri perusahaan ini?",
    "kapan pertama kali dirilis?",
    "apa syarat dan ketentuan garansi?",
    "bagaimana cara menghubungi layanan pelanggan?",
    "apa penyebab penyakit ini?",
    "siapa presiden pertama indonesia?",
    "mengapa pesanan saya belum dikirim?",
    "apa arti kata ini?",
    "what are the effects of temperature on the reaction?",
    "how does the pressure vary along the surface?",
    "what is the relationship between the two methods?",
    "which studies compare these treatments?",
    "what methods are used to measure it?",
    "what is known about the cause of the failure?",
    "apa dampak perubahan iklim terhadap pertanian?",
    "berapa jumlah penduduk kota itu?",
    "bagaimana proses terjadinya hujan?",
    "apa hubungan antara kedua peristiwa itu?",
    "how much does it cost?",
    "what is the monthly payment with a down payment?",
    "is there a discount this month?",
    "berapa harganya?",
    "harga mobil baru",
    "berapa cicilan per bulannya?",
    "tarif pengiriman ke luar kota",
)
NEIGHBOURS = 3  # specs when most of the nearest examples are specs questions


@dataclass(frozen=True, slots=True)
class Routing:
    routes: tuple[Route, ...]  # "knowledge" first, then the others in a fixed order
    evidence: dict[str, str]  # route -> why it was chosen


@dataclass(frozen=True, slots=True)
class Keywords:
    pricing: Sequence[str]
    financing: Sequence[str]


# The example questions' vectors from the local model, shipped with the package so that no
# process spends its first search embedding them (57 embeddings: ~0.4 s alone, seconds beside
# other work). Made, and checked against the model, by tests/test_router_examples.py.
EXAMPLE_VECTORS = Path(__file__).with_name("router_examples.npz")


def shipped_examples(model_name: str) -> np.ndarray | None:
    """The shipped vectors of SPECS_EXAMPLES + OTHER_EXAMPLES for `model_name`, if they are
    for exactly these questions; else None."""
    if not EXAMPLE_VECTORS.is_file():
        return None
    with np.load(EXAMPLE_VECTORS, allow_pickle=False) as shipped:
        if str(shipped["model"]) != model_name:
            return None
        if tuple(str(text) for text in shipped["texts"]) != (*SPECS_EXAMPLES, *OTHER_EXAMPLES):
            return None
        return np.asarray(shipped["vectors"], dtype=np.float32)


class Router:
    """Routes questions; the example questions' vectors are the shipped ones for the local
    model, else embedded once, on first use."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._examples: tuple[np.ndarray, np.ndarray] | None = None
        self._lock = asyncio.Lock()

    async def route(self, text: str, vector: np.ndarray | None, keywords: Keywords) -> Routing:
        """The routes of `text`; `vector` is its query embedding, None in keyword mode."""
        lowered = _words(text)
        evidence: dict[str, str] = {"knowledge": "always"}
        if found := _first_keyword(lowered, keywords.pricing):
            evidence["pricing"] = f"keyword '{found}'"
        if found := _first_keyword(lowered, SPECS_KEYWORDS):
            evidence["specs"] = f"keyword '{found}'"
        elif vector is not None and (similar := await self._specs_by_meaning(vector)):
            evidence["specs"] = similar
        if found := _first_keyword(lowered, keywords.financing):
            evidence["financing"] = f"keyword '{found}'"
            # An installment is computed from the product's price.
            evidence.setdefault("pricing", "financing needs the price")
        order: tuple[Route, ...] = ("knowledge", "pricing", "specs", "financing")
        return Routing(tuple(r for r in order if r in evidence), evidence)

    async def _specs_by_meaning(self, vector: np.ndarray) -> str | None:
        examples, is_specs = await self._example_vectors()
        similarity = examples @ (vector / np.linalg.norm(vector))
        nearest = np.argsort(-similarity)[:NEIGHBOURS]
        votes = int(is_specs[nearest].sum())
        if votes * 2 <= NEIGHBOURS:
            return None
        best = int(nearest[0]) if is_specs[nearest[0]] else int(nearest[is_specs[nearest]][0])
        return (
            f"meaning: {votes} of the {NEIGHBOURS} nearest example questions ask about "
            f"attributes (closest: '{SPECS_EXAMPLES[best]}', cosine {similarity[best]:.3f})"
        )

    async def _example_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        async with self._lock:
            if self._examples is None:
                texts = (*SPECS_EXAMPLES, *OTHER_EXAMPLES)
                vectors = shipped_examples(self.embedder.model_name)
                if vectors is None:
                    found = await all_or_none(*(self.embedder.embed_query(t) for t in texts))
                    vectors = np.stack([np.asarray(v, np.float32) for v in found])
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                labels = np.array([i < len(SPECS_EXAMPLES) for i in range(len(texts))])
                self._examples = (vectors, labels)
            return self._examples


def _words(text: str) -> str:
    """Lower case, punctuation to spaces, padded: keywords match whole words only."""
    return " " + " ".join(re.findall(r"\w+", text.lower())) + " "


def _first_keyword(words: str, keywords: Sequence[str]) -> str | None:
    return next((k for k in keywords if _phrase(k) in words), None)


@functools.lru_cache(maxsize=4096)
def _phrase(keyword: str) -> str:
    """A keyword spelled as `_words` spells a text. Kept: every search checks the collection's
    ~50 keywords, and spelling them each time was ~90 µs of a search (now ~10)."""
    return _words(keyword)
