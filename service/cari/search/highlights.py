"""Highlights: the passage of a result chunk around the query's words, the matches marked.

PostgreSQL finds the passage (`ts_headline` in `chunks_for_results.sql`): the words keyword
search looks for, in the chunk's own language, synonyms included, so "cicilan" is marked for a
query "angsuran" when a rule says so. A highlight is HTML: the text is escaped (`&`, `<`, `>`,
quotes) and each match is wrapped in `<mark>`…`</mark>`, so a client can insert it into a page
as it is, and a plain-text client can drop the tags and unescape (`plain`). HTML tags in the
content itself are dropped from the passage by `ts_headline`'s parser.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from typing import Any

from cari.search import lexemes
from cari.search.lexemes import Lexemes

START, STOP = "\ue000", "\ue001"  # private-use characters: no text means them
MARK, UNMARK = "<mark>", "</mark>"
MAX_WORDS, MIN_WORDS = 35, 15  # the passage's length in words; MIN_WORDS when nothing matches
# ts_headline's options; the markers quoted, as its option syntax wants for any value. A chunk
# of at most MAX_WORDS words is shown whole (HighlightAll): the passage ts_headline picks can
# start mid-sentence even then ("FILE to back up the database" for "Run cari db dump FILE to
# back up the database"), hiding the words that answer the question.
OPTIONS = f'StartSel="{START}", StopSel="{STOP}", MaxWords={MAX_WORDS}, MinWords={MIN_WORDS}'
WHOLE = f'StartSel="{START}", StopSel="{STOP}", HighlightAll=true'
_TAGS = re.compile(f"{re.escape(MARK)}|{re.escape(UNMARK)}")


def params(asked: Iterable[Lexemes]) -> dict[str, Any]:
    """The parameters `chunks_for_results.sql` takes for the highlights of a question whose
    sub-queries looked for `asked`."""
    return {
        **lexemes.words(asked),
        "start": START,
        "stop": STOP,
        "options": OPTIONS,
        "whole": WHOLE,
        "max_words": MAX_WORDS,
    }


def marked(headline: str) -> str:
    """ts_headline's passage as HTML: escaped, the matches in <mark>; spaces collapsed."""
    escaped = html.escape(" ".join(headline.split()))
    return escaped.replace(START, MARK).replace(STOP, UNMARK)


def plain(highlight: str) -> str:
    """A highlight as plain text: the marks dropped, the text unescaped."""
    return html.unescape(_TAGS.sub("", highlight))
