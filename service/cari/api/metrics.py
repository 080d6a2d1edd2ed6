"""GET /metrics, and the HTTP requests' own metrics.

Litestar's Prometheus middleware counts and times requests per route template (not the raw
path: the series stay bounded), method and status: `cari_requests_total`,
`cari_request_duration_seconds`, `cari_requests_in_progress`, `cari_requests_error_total`. They
share prometheus_client's registry with Cari's own metrics (`cari.observability.metrics`), and
the plugin's controller renders it.
"""

from __future__ import annotations

from litestar.plugins.prometheus import PrometheusConfig, PrometheusController

PROMETHEUS = PrometheusConfig(app_name="cari", prefix="cari", group_path=True)


class MetricsController(PrometheusController):
    """GET /metrics: open like the probes (a scraper sends no API key; it holds counts, not
    data). Not in the OpenAPI schema: its body is Prometheus's text format, which
    docs/operations.md describes series by series."""

    include_in_schema = False
