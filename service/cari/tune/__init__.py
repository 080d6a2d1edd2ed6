"""Measuring a collection on its own data: `cari tune ef-search` (HNSW recall against the exact
scan, and latency, per `ef_search`) and `cari eval` (ranking quality per mode on judged
questions)."""
