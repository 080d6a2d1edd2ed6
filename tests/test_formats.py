import json

import pytest

from cari.errors import InvalidInput
from cari.ingest.formats import FORMATS, ParsedDocument, Rejected, Section, detect_format, parse


def make_pdf(pages: list[str], title: str | None = None) -> bytes:
    """A minimal valid PDF: one Helvetica text line per page ('' for a blank page)."""
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode() if text else b""
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]"
            b" /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    trailer = b"/Size %d /Root 1 0 R" % (len(objects) + 1)
    if title is not None:
        objects.append(b"<< /Title (%s) >>" % title.encode())
        trailer += b" /Info %d 0 R" % len(objects)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< %s >>\nstartxref\n%d\n%%%%EOF\n" % (trailer, xref)
    return bytes(out)


def one(data: bytes, fmt: str, name: str = "doc") -> ParsedDocument:
    (document,) = parse(data, fmt, name=name)
    assert isinstance(document, ParsedDocument)
    return document


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("a.txt", "text"),
        ("notes/A.TEXT", "text"),
        ("readme.md", "markdown"),
        ("x.markdown", "markdown"),
        ("page.html", "html"),
        ("page.HTM", "html"),
        ("docs.jsonl", "jsonl"),
        ("docs.ndjson", "jsonl"),
        ("paper.pdf", "pdf"),
    ],
)
def test_detect_format(name: str, fmt: str) -> None:
    assert detect_format(name) == fmt
    assert fmt in FORMATS


@pytest.mark.parametrize("name", ["report.docx", "README", "archive.tar.gz"])
def test_unknown_extension_names_the_supported_ones(name: str) -> None:
    with pytest.raises(
        InvalidInput, match=r"^format: .*\.txt.*\.md.*\.html.*\.jsonl.*\.pdf"
    ) as exc:
        detect_format(name)
    assert exc.value.field == "format"


def test_unknown_format() -> None:
    with pytest.raises(InvalidInput, match=r"^format: must be one of text, markdown"):
        parse(b"x", "docx", name="x")


def test_text_is_kept_and_has_no_title() -> None:
    document = one(
        b"\xef\xbb\xbf  First line.\r\nSecond line.\n\nNext paragraph.\n", "text", "a.txt"
    )
    assert document == ParsedDocument(
        id=None,
        title="",
        sections=[Section("First line.\nSecond line.\n\nNext paragraph.")],
        metadata={},
        source="a.txt",
    )


def test_invalid_utf8_names_the_byte() -> None:
    with pytest.raises(InvalidInput, match=r"^content: not valid UTF-8 \(.* at byte 6\)$"):
        parse(b"\xef\xbb\xbfabc\xffdef", "text", name="x")
    # In JSON Lines only the bad line is rejected; the others still load.
    good = b'{"id": "a", "text": "fine"}'
    first, second = parse(b"\xc3\n" + good, "jsonl", name="x")
    assert first == Rejected(
        "line 1", None, "content: not valid UTF-8 (invalid continuation byte at byte 0)"
    )
    assert isinstance(second, ParsedDocument) and second.id == "a"


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
@pytest.mark.parametrize("data", [b"", b" \n\t\r\n "])
def test_empty_content(fmt: str, data: bytes) -> None:
    with pytest.raises(InvalidInput, match=r"^content: is empty$"):
        parse(data, fmt, name="x")


def test_html_without_visible_text_is_empty() -> None:
    with pytest.raises(InvalidInput, match=r"^content: is empty$"):
        parse(b"<html><script>alert(1)</script><!-- nothing --></html>", "html", name="x")


def test_markdown_title_and_structure() -> None:
    text = (
        "<!-- generated, do not edit -->\n"
        "```sh\n# not a heading\n```\n"
        "## Intro\n\nSome *text*.\n\n"
        "# The Real Title #\n\n"
        "Body <!-- a\nmulti-line comment --> continues.\n"
    )
    document = one(text.encode(), "markdown")
    assert document.title == "The Real Title"
    (section,) = document.sections
    assert section.text == (
        "```sh\n# not a heading\n```\n## Intro\n\nSome *text*.\n\n"
        "# The Real Title #\n\nBody  continues."
    )


def test_markdown_without_level_one_heading_has_no_title() -> None:
    assert one(b"## Only a subheading\n\n#hashtag is no heading", "markdown").title == ""


def test_html_text_title_and_structure() -> None:
    page = b"""<!DOCTYPE html>
    <html><head><title> Caf&eacute; &amp; Co </title>
    <style>p { color: red }</style><script>if (a < b) { document.write("hidden") }</script>
    </head><body>
    <noscript>Enable JavaScript</noscript><template><p>template text</p></template>
    <h1>Menu</h1>
    <p>Fresh   <b>coffee</b>
       &mdash; daily&nbsp;at 8&#58;00.</p>
    <ul><li>Espresso</li><li>Kopi tubruk</li></ul>
    <table><tr><td>Tea</td><td>Rp 10.000</td></tr><tr><td>Milk</td><td>Rp 8.000</td></tr></table>
    <div>First line<br>second line</div>
    <pre>x = 1
    y = 2</pre>
    </body></html>"""
    document = one(page, "html", "menu.html")
    assert document.title == "Café & Co"
    (section,) = document.sections
    assert section.text == (
        "Menu\n\n"
        "Fresh coffee \u2014 daily at 8:00.\n\n"
        "Espresso\nKopi tubruk\n\n"
        "Tea Rp 10.000\nMilk Rp 8.000\n\n"
        "First line\nsecond line\n\n"
        "x = 1\ny = 2"
    )
    for hidden in ("color", "hidden", "JavaScript", "template text"):
        assert hidden not in section.text


def test_html_title_falls_back_to_first_h1() -> None:
    document = one(b"<h1>Main <i>topic</i></h1><p>Text.</p><h1>Other</h1>", "html")
    assert document.title == "Main topic"
    assert document.sections[0].text == "Main topic\n\nText.\n\nOther"


def test_jsonl_records_and_rejections() -> None:
    lines = [
        json.dumps({"id": "a", "title": "Alpha", "text": "Hello.", "metadata": {"lang": "en"}}),
        "",
        json.dumps({"id": 7, "content": "Halo.", "source": "https://example.com/7"}),
        "{not json",
        json.dumps(["an", "array"]),
        json.dumps({"text": "no id"}),
        json.dumps({"id": True, "text": "boolean id"}),
        json.dumps({"id": "", "text": "empty id"}),
        json.dumps({"id": "x" * 513, "text": "long id"}),
        json.dumps({"id": "no-text"}),
        json.dumps({"id": "blank", "text": "  \n "}),
        json.dumps({"id": "number", "text": 42}),
        json.dumps({"id": "meta", "text": "x", "metadata": ["tags"]}),
        json.dumps({"id": "title", "text": "x", "title": 1}),
        json.dumps({"id": "x" * 512, "text": "Last one\r\nstill parsed.", "metadata": None}),
    ]
    items = list(parse("\n".join(lines).encode(), "jsonl", name="docs.jsonl"))
    assert items[0] == ParsedDocument("a", "Alpha", [Section("Hello.")], {"lang": "en"}, None)
    assert items[1] == ParsedDocument("7", "", [Section("Halo.")], {}, "https://example.com/7")
    rejected = items[2:-1]
    assert all(isinstance(r, Rejected) for r in rejected)
    assert [(r.where, r.id, r.reason) for r in rejected if isinstance(r, Rejected)] == [
        (
            "line 4",
            None,
            "record: not valid JSON (Expecting property name enclosed in double "
            "quotes at column 2)",
        ),
        ("line 5", None, "record: must be a JSON object"),
        ("line 6", None, "id: is required"),
        ("line 7", None, "id: must be a string or an integer"),
        ("line 8", None, "id: must not be empty"),
        ("line 9", None, "id: must be at most 512 characters"),
        ("line 10", "no-text", "text: is required (or content)"),
        ("line 11", "blank", "text: must not be empty"),
        ("line 12", "number", "text: must be a string"),
        ("line 13", "meta", "metadata: must be a JSON object"),
        ("line 14", "title", "title: must be a string"),
    ]
    assert len(items) == 14  # the blank line is skipped
    assert items[-1] == ParsedDocument(
        "x" * 512, "", [Section("Last one\nstill parsed.")], {}, None
    )


def test_jsonl_json_errors_read_once_and_say_what_to_do() -> None:
    # Python's messages for these end in "at": the column followed as "at at column 11".
    lines = [b'{"id": "a", "text": "tab\there"}', b'{"id": "b", "text": "open']
    parsed = parse(b"\n".join(lines), "jsonl", name="d.jsonl")
    reasons = [r.reason for r in parsed if isinstance(r, Rejected)]
    assert reasons == [
        "record: not valid JSON (Invalid control character at column 25: write a tab or line "
        "break inside a string as \\t or \\n)",
        "record: not valid JSON (Unterminated string starting at column 21)",
    ]
    assert not any("at at" in reason for reason in reasons)


def test_jsonl_keeps_unicode_line_separators_inside_strings() -> None:
    data = json.dumps({"id": "u", "text": "one\u2028two"}, ensure_ascii=False).encode()
    (document,) = parse(data, "jsonl", name="x")
    assert isinstance(document, ParsedDocument)
    assert document.sections == [Section("one\u2028two")]


def test_pdf_pages_and_title() -> None:
    data = make_pdf(["Hello from page one.", "", "Halo dari halaman tiga."], title="Laporan")
    document = one(data, "pdf", "laporan.pdf")
    assert document.title == "Laporan"
    assert document.source == "laporan.pdf"
    assert document.sections == [
        Section("Hello from page one.", {"page": 1}),
        Section("Halo dari halaman tiga.", {"page": 3}),
    ]


def test_pdf_without_title() -> None:
    assert one(make_pdf(["Only page"]), "pdf").title == ""


def test_pdf_without_text() -> None:
    with pytest.raises(InvalidInput, match=r"^content: no text could be extracted"):
        parse(make_pdf(["", ""]), "pdf", name="scan.pdf")


@pytest.mark.parametrize("data", [b"", b"not a pdf at all", make_pdf(["Cut short"])[:150]])
def test_unreadable_pdf(data: bytes) -> None:
    with pytest.raises(InvalidInput, match=r"^content: not a readable PDF: "):
        parse(data, "pdf", name="broken.pdf")


def test_jsonl_rejects_values_postgres_cannot_store() -> None:
    lines = [
        '{"id": "nan", "text": "t", "metadata": {"n": NaN}}',
        '{"id": "big", "text": "t", "metadata": {"n": 1e400}}',
        '{"id": "surrogate", "text": "bad \\ud800 text"}',
        '{"id": "fine", "text": "t", "metadata": {"n": 1.5}}',
    ]
    items = list(parse("\n".join(lines).encode(), "jsonl", name="x.jsonl"))
    reasons = [item.reason for item in items if isinstance(item, Rejected)]
    assert reasons == ["record: holds NaN, Infinity or invalid Unicode (a lone surrogate)"] * 3
    assert isinstance(items[3], ParsedDocument) and items[3].id == "fine"
