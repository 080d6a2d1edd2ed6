"""The router with the real local model: keywords for pricing and financing, meaning for
specs, for any kind of product, in English and Indonesian."""

from __future__ import annotations

import asyncio

import pytest

from cari.embed import LocalEmbedder
from cari.schema.collections import FINANCING_KEYWORDS, PRICING_KEYWORDS
from cari.search.router import Keywords, Router

DEFAULTS = Keywords(PRICING_KEYWORDS, FINANCING_KEYWORDS)


@pytest.fixture(scope="module")
def router() -> Router:
    return Router(LocalEmbedder())


def routes(router: Router, text: str, keywords: Keywords = DEFAULTS) -> tuple[str, ...]:
    async def run() -> tuple[str, ...]:
        vector = await router.embedder.embed_query(text)
        return (await router.route(text, vector, keywords)).routes

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("harga dan spesifikasi Honda Civic", ("knowledge", "pricing", "specs")),
        (
            "cicilan honda civic dp 50 juta spesifikasi",
            ("knowledge", "pricing", "specs", "financing"),
        ),
        ("harga toyota avanza", ("knowledge", "pricing")),
        ("monthly payment for the X200 with $5k down", ("knowledge", "pricing", "financing")),
        ("siapa presiden pertama indonesia?", ("knowledge",)),
        ("what is the return policy?", ("knowledge",)),
    ],
)
def test_seed_examples(router: Router, text: str, expected: tuple[str, ...]) -> None:
    assert routes(router, text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "what material is it made of?",
        "does it support Bluetooth?",
        "berapa dimensinya?",
        "is the sofa fabric washable?",
        "how much RAM does the laptop have?",
        "apakah kulkas ini hemat listrik?",
        "what is the maximum load of the forklift?",
    ],
)
def test_specs_by_meaning_for_any_product(router: Router, text: str) -> None:
    assert "specs" in routes(router, text)


@pytest.mark.parametrize(
    "text",
    [
        "how do I reset my password?",
        "kapan Indonesia merdeka?",
        "what are the effects of calcium on the heart",
        "how does the boundary layer thickness vary with pressure gradient",
        "bagaimana cara mengajukan klaim garansi?",
    ],
)
def test_questions_that_are_not_about_attributes(router: Router, text: str) -> None:
    assert "specs" not in routes(router, text)


def test_keyword_mode_routes_specs_by_words_only(router: Router) -> None:
    async def run(text: str) -> tuple[str, ...]:
        return (await router.route(text, None, DEFAULTS)).routes

    assert asyncio.run(run("does it support Bluetooth?")) == ("knowledge",)
    assert asyncio.run(run("spesifikasi honda civic")) == ("knowledge", "specs")


def test_keywords_are_whole_words_and_configurable(router: Router) -> None:
    own = Keywords(pricing=["tarif"], financing=["angsur", "uang muka"])
    assert routes(router, "tarif parkir", own) == ("knowledge", "pricing")
    # A financing question needs the product's price: it routes to pricing too.
    assert {"pricing", "financing"} <= set(routes(router, "uang muka honda civic", own))
    assert "financing" not in routes(router, "cicilan honda civic", own)
    # "dp" is a financing keyword; "dpr" (parliament) is another word.
    assert "financing" not in routes(router, "siapa ketua dpr?")
