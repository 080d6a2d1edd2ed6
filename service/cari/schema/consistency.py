"""The consistency token: a write's answer carries it in a header, and a read that sends it
back sees that write, also on a replica (`cari.db.replicas`)."""

from __future__ import annotations

import re

from cari.errors import InvalidInput

HEADER = "Cari-Consistency-Token"
# A consistency token: a WAL position as PostgreSQL writes it (the OpenAPI document states it).
TOKEN_PATTERN = r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$"
_TOKEN = re.compile(TOKEN_PATTERN)
TOKEN_DESCRIPTION = (
    "The consistency token of a write's response: this read then sees that write (it runs on "
    "a read replica that has replayed it, or on the primary)."
)


def parse_token(text: str) -> int:
    """A consistency token (PostgreSQL's text form of a WAL position, `16/B374D848`) as a
    byte position."""
    # `match`, as JSON Schema tools read the pattern: `$` also before a final newline.
    if not _TOKEN.match(text):
        raise InvalidInput(HEADER, "is not a consistency token from a write's response")
    high, low = text.rstrip("\n").split("/")
    return int(high, 16) << 32 | int(low, 16)


def format_token(position: int) -> str:
    return f"{position >> 32:X}/{position & 0xFFFFFFFF:X}"
