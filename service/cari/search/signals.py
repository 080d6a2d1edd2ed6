"""Query signals: does the query name an exact token (SKU, error code, id, version)?

Such tokens are found by keyword search far better than by embeddings, so their presence shifts
the fusion weights toward keyword. A false positive shifts them for a natural question, so every
rule prefers missing a token to inventing one:

- SKUs are upper case only (`SKU-9942-X`, `XJ9000`) and need three digits, so topics with short
  numbers (`COVID-19`, `G20`, `N95`), amounts (`250RB`, `RP250000`, `1080P`) and Indonesian
  ordinals (`KE-100`, `1990-AN`) are not SKUs; lower-case `sku-9942-x` is missed.
- Bare two-part numbers (`18.6`) are decimals, times or prices unless a word such as "versi"
  precedes them; dotted thousands (`1.500.000`) and dates (`17.08.2024`) are never versions.
- Errno-style names (`ECONNRESET`) come from the platform's errno table, not from a pattern,
  because upper-case words at a sentence start look just the same.
"""

from __future__ import annotations

import errno
import re
from dataclasses import dataclass
from typing import Literal

from cari.schema.search import ExactToken, TokenKind

# Whole runs, so that no part of a longer word is taken for a token; trimmed of punctuation.
_TOKEN = re.compile(r"[\w.\-]+")
_UUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_ERROR_CODE = re.compile(
    r"0[xX][0-9a-fA-F]{4,16}"  # 0x80070005
    r"|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+"  # ERR_CONNECTION_REFUSED, E_ACCESS_DENIED
    r"|(?:E|ERR|ERROR|ORA)-?\d{3,5}"  # E1234, ERR-404, ORA-00942
)
_ERRNO_NAMES = frozenset(errno.errorcode.values()) | {"ENOTFOUND"}  # Node's DNS failure
_HEX_ID = re.compile(r"[0-9a-f]{8,}|[0-9A-F]{8,}")
_PRERELEASE = r"(?:-[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?"
_PREFIXED_VERSION = re.compile(rf"[vV]\d+(?:\.\d+){{1,3}}{_PRERELEASE}")
_BARE_VERSION = re.compile(rf"\d+(?:\.\d+){{2,3}}{_PRERELEASE}")
_TWO_PART_NUMBER = re.compile(r"\d+\.\d+")
_VERSION_CUES = frozenset({"version", "versi", "ver", "release", "rilis"})
_NOT_VERSION = re.compile(r"\d{1,3}(?:\.\d{3})+|\d{1,2}\.\d{1,2}\.(?:19|20)\d{2}")
_SKU = re.compile(r"[A-Z0-9]+(?:-[A-Z0-9]+)*")
_NOT_SKU = re.compile(r"(?:RP|IDR|USD)?\d+[A-Z]{0,3}|KE-\d+|\d+-AN")


@dataclass(frozen=True, slots=True)
class Signal:
    exact_tokens: tuple[ExactToken, ...]

    @property
    def name(self) -> Literal["exact_token", "general"]:
        return "exact_token" if self.exact_tokens else "general"


def detect(query: str) -> Signal:
    """The exact tokens in `query`, in order of appearance, each once."""
    found: dict[str, ExactToken] = {}
    previous = ""
    for match in _TOKEN.finditer(query):
        text = match.group().strip("._-")
        # The patterns are ASCII; `\d` alone would also take other scripts' digits.
        kind = _kind(text, previous) if text.isascii() else None
        if kind is not None and text not in found:
            found[text] = ExactToken(text, kind)
        previous = text
    return Signal(tuple(found.values()))


def _kind(token: str, previous: str) -> TokenKind | None:
    if _UUID.fullmatch(token):
        return "uuid"
    if _ERROR_CODE.fullmatch(token) or token in _ERRNO_NAMES:
        return "error_code"
    if _HEX_ID.fullmatch(token) and _has_digit(token) and not token.isdigit():
        return "hex_id"
    if _is_version(token, previous):
        return "version"
    if _is_sku(token):
        return "sku"
    return None


def _is_version(token: str, previous: str) -> bool:
    if _PREFIXED_VERSION.fullmatch(token):
        return True
    if _NOT_VERSION.fullmatch(token):
        return False
    return bool(
        _BARE_VERSION.fullmatch(token)
        or (_TWO_PART_NUMBER.fullmatch(token) and previous.lower() in _VERSION_CUES)
    )


def _is_sku(token: str) -> bool:
    return (
        len(token) >= 4
        and _SKU.fullmatch(token) is not None
        and not token.replace("-", "").isdigit()
        and sum(char.isdigit() for char in token) >= 3
        and not _NOT_SKU.fullmatch(token)
    )


def _has_digit(token: str) -> bool:
    return any(char.isdigit() for char in token)
