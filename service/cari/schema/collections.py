"""Collections (`/v1/collections`): a named knowledge base with its language and search
defaults; and its synonym rules."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec

from cari.limits import (
    EMBEDDER_NAME_PATTERN,
    MAX_SYNONYM_RULES,
    EfSearch,
    Method,
    Mode,
    RrfK,
    Threshold,
    TopK,
    Weight,
)

# The words that route a question to the catalog's prices and to installments, by default
# (EN and ID; a collection sets its own: `pricing_keywords`, `financing_keywords`).
PRICING_KEYWORDS = (
    "harga", "price", "prices", "berapa", "biaya", "cost", "costs", "tarif", "pricing", "promo",
    "diskon", "discount", "budget", "kisaran", "sekitar", "how much", "murah", "mahal",
    "cheap", "expensive",
)  # fmt: skip
FINANCING_KEYWORDS = (
    "cicilan", "angsuran", "kredit", "dp", "tenor", "installment", "installments", "instalment",
    "down payment", "monthly payment", "bunga", "interest", "leasing", "finance", "financing",
    "otr", "uang muka", "per bulan", "per month", "nyicil", "loan", "pinjaman", "credit",
)  # fmt: skip

Fusion = Annotated[
    Method,
    msgspec.Meta(
        description="rrf: weighted reciprocal rank fusion; minmax / zscore: the weighted mean of "
        "each retriever's scores normalised over its candidates."
    ),
]

# A slug: lower-case letters, digits, '-' and '_', starting with a letter or digit.
Name = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=63,
        pattern="^[a-z0-9][a-z0-9_-]*$",
        description="Slug: a-z, 0-9, '-', '_'; 1-63 characters, not starting with '-' or '_'.",
    ),
]
Language = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=63,
        pattern="^[A-Za-z_][A-Za-z0-9_]*$",
        description="A PostgreSQL text-search configuration installed on the server: simple, "
        "english, indonesian, ... (another name is refused, the 422 lists those installed).",
    ),
]
K1 = Annotated[float, msgspec.Meta(ge=0, le=10, description="BM25 term-frequency saturation.")]
B = Annotated[float, msgspec.Meta(ge=0, le=1, description="BM25 length normalisation.")]
K3 = Annotated[
    float,
    msgspec.Meta(
        ge=0,
        le=1000,
        description="BM25 query-term saturation: a word the query says n times weighs "
        "n·(k3+1)/(k3+n); 0 counts it once, 1000 almost n times.",
    ),
]
TypoWeight = Annotated[
    float,
    msgspec.Meta(
        ge=0,
        lt=1,
        description="Typo tolerance: a query word the collection does not know (and not a "
        "common word) also matches its closest known word, weighing this against an exact "
        "match; 0 turns it off.",
    ),
]
Keywords = Annotated[
    list[Annotated[str, msgspec.Meta(min_length=1, max_length=64)]],
    msgspec.Meta(max_length=500, description="Words or phrases; matched as whole words."),
]
NoInformation = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=1000,
        description="The answer when no source passes the threshold; unset: a default sentence "
        "in the question's language.",
    ),
]
EmbedderName = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=63,
        pattern=EMBEDDER_NAME_PATTERN,
        description="The embedder of the collection's vectors: 'local' (the bundled model) or "
        "a name from the server's CARI_EMBEDDERS; unset: the server's default embedder. "
        "`cari reembed --embedder` changes it.",
    ),
]
AnswerThreshold = Annotated[
    Threshold,
    msgspec.Meta(
        description="The least relevance (0-1) a source needs to reach an answer: when none "
        "reaches it, the answer is the `no_information` sentence."
    ),
]
SearchThreshold = Annotated[
    Threshold,
    msgspec.Meta(
        description="The least relevance (0-1) a search returns when the request sets no "
        "`threshold`; null (the default): searches cut nothing and return the top k ranked, "
        "each with its relevance and band."
    ),
]
CollectionEfSearch = Annotated[
    EfSearch,
    msgspec.Meta(
        description="The HNSW `ef_search` of this collection's vector searches when the request "
        "sets none (`cari tune ef-search --apply` measures and stores it); null (the default): "
        "the server's CARI_HNSW_EF_SEARCH."
    ),
]
TitleBoost = Annotated[
    float, msgspec.Meta(ge=0, le=100, description="How much a title word counts vs a body word.")
]


class RelevanceScale(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The query-chunk cosines at relevance 0.1 and 0.9 (cari.search.relevance)."""

    cosine_floor: Annotated[float, msgspec.Meta(ge=-1, lt=1)]
    cosine_ceiling: Annotated[float, msgspec.Meta(gt=-1, le=1)]


RelevanceScaleSetting = Annotated[
    RelevanceScale,
    msgspec.Meta(
        description="The relevance scale of this collection, winning over its fitted scale "
        "(`relevance_fit`) and the server's CARI_RELEVANCE_COSINE_*; null: the fit's."
    ),
]


class Collection(msgspec.Struct, kw_only=True):
    name: str
    language: str
    search_mode: Mode
    fusion: Method
    vector_weight: float
    keyword_weight: float
    rrf_k: int
    threshold: float  # what answers apply
    top_k: int
    bm25_k1: float
    bm25_b: float
    bm25_k3: float
    typo_weight: float
    title_boost: float
    pricing_keywords: list[str]
    financing_keywords: list[str]
    no_information: str | None
    # 'local', a CARI_EMBEDDERS name, or (for the default embedder, which follows CARI_EMBEDDER)
    # CARI_EMBEDDER's value; None only inside the server, before `named`.
    embedder: str | None
    dimensions: int
    next_embedder: str | None
    created_at: datetime
    updated_at: datetime
    search_threshold: float | None = None  # what searches apply; None: no cut
    relevance_scale: RelevanceScale | None = None  # set for the collection: wins over the fit
    relevance_fit: dict[str, Any] | None = None  # cari.search.fit: scale, chunks, embedder, when
    ef_search: int | None = None  # None: the server's CARI_HNSW_EF_SEARCH


class CollectionCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: Name
    language: Language = "simple"
    search_mode: Mode = "hybrid"
    fusion: Fusion = "zscore"
    vector_weight: Weight = 1.0
    keyword_weight: Weight = 1.0
    rrf_k: RrfK = 60
    threshold: AnswerThreshold = 0.25
    search_threshold: SearchThreshold | None = None
    top_k: TopK = 5
    bm25_k1: K1 = 1.2
    bm25_b: B = 0.75
    bm25_k3: K3 = 1000.0
    typo_weight: TypoWeight = 0.7
    title_boost: TitleBoost = 3.0
    pricing_keywords: Keywords = msgspec.field(default_factory=lambda: list(PRICING_KEYWORDS))
    financing_keywords: Keywords = msgspec.field(default_factory=lambda: list(FINANCING_KEYWORDS))
    no_information: NoInformation | None = None
    embedder: EmbedderName | None = None
    ef_search: CollectionEfSearch | None = None


class CollectionUpdate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Only the fields present change."""

    language: Language | msgspec.UnsetType = msgspec.UNSET
    search_mode: Mode | msgspec.UnsetType = msgspec.UNSET
    fusion: Fusion | msgspec.UnsetType = msgspec.UNSET
    vector_weight: Weight | msgspec.UnsetType = msgspec.UNSET
    keyword_weight: Weight | msgspec.UnsetType = msgspec.UNSET
    rrf_k: RrfK | msgspec.UnsetType = msgspec.UNSET
    threshold: AnswerThreshold | msgspec.UnsetType = msgspec.UNSET
    search_threshold: SearchThreshold | msgspec.UnsetType | None = msgspec.UNSET  # null: no cut
    top_k: TopK | msgspec.UnsetType = msgspec.UNSET
    bm25_k1: K1 | msgspec.UnsetType = msgspec.UNSET
    bm25_b: B | msgspec.UnsetType = msgspec.UNSET
    bm25_k3: K3 | msgspec.UnsetType = msgspec.UNSET
    typo_weight: TypoWeight | msgspec.UnsetType = msgspec.UNSET
    title_boost: TitleBoost | msgspec.UnsetType = msgspec.UNSET
    pricing_keywords: Keywords | msgspec.UnsetType = msgspec.UNSET
    financing_keywords: Keywords | msgspec.UnsetType = msgspec.UNSET
    no_information: NoInformation | msgspec.UnsetType | None = msgspec.UNSET  # null: the default
    relevance_scale: RelevanceScaleSetting | msgspec.UnsetType | None = msgspec.UNSET  # null: fit
    ef_search: CollectionEfSearch | msgspec.UnsetType | None = msgspec.UNSET  # null: the server's


Rule = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=1000,
        description="`a, b, c` (equivalent terms) or `a, b => c` (a query for a or b also "
        "looks for c).",
    ),
]


class Synonyms(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A collection's synonym rules, in order."""

    rules: Annotated[
        list[Rule],
        msgspec.Meta(max_length=MAX_SYNONYM_RULES, examples=[["CRV, CR-V", "angsuran => cicilan"]]),
    ]
