"""Structured sources for pricing and specs questions: catalog items and financing rates."""
