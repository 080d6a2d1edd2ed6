"""The HTTP edge: parse, validate, call the core, render."""

from cari.api.app import create_app

__all__ = ["create_app"]
