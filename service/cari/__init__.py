"""Cari: hybrid search and RAG where all retrieval lives in PostgreSQL."""

__version__ = "0.1.0"
