"""Traces, sent to an OpenTelemetry collector when configured the OpenTelemetry way.

`OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) turns them on; the SDK
reads every other `OTEL_*` variable itself (service name, resource attributes, sampler, headers,
batching). The packages are the `otel` extra: a server asked for traces without them stops with
one line saying how to install them, rather than serving without the traces it was asked for.

`configure` is called by `cari serve` (like `cari.observability.logs.configure`): it installs the
SDK's tracer provider for the process and puts the trace and span ids on log records. The HTTP
app then adds its server spans (`cari.api.tracing`), and `span` gives the search stages theirs.
Unconfigured, the app has no tracing middleware and `span` is a shared null context: nothing is
traced, at no cost to a request.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from cari.errors import ConfigError

ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
SERVICE_NAME = "cari"  # unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name it

_NOTHING: AbstractContextManager[object] = contextlib.nullcontext()
# The tracer's `start_as_current_span` once `configure` installed a provider; None: off.
_start_span: Callable[[str], AbstractContextManager[object]] | None = None


def requested() -> bool:
    """Whether the environment asks for traces."""
    return any(os.environ.get(name) for name in ENDPOINTS)


def active() -> bool:
    """Whether this process sends traces (`configure` installed a provider)."""
    return _start_span is not None


def span(name: str) -> AbstractContextManager[object]:
    """A span named `name`, child of the current one, around a block; nothing when off."""
    return _NOTHING if _start_span is None else _start_span(name)


def tag(name: str, value: str) -> None:
    """Set `name` on the current span (a request's server span, from its handler's guard);
    nothing when off."""
    if _start_span is not None:
        from opentelemetry.trace import get_current_span

        get_current_span().set_attribute(name, value)


def configure() -> None:
    """Send this process's spans to the configured OTLP/HTTP endpoint, if one is configured.

    Raises ConfigError when one is but the `otel` extra is missing, or another protocol is
    asked for.
    """
    global _start_span
    if not requested() or _start_span is not None:
        return
    for name in PROTOCOLS:
        # The exporter would send HTTP to a gRPC port and log a failure per batch: say so now.
        if os.environ.get(name, "http/protobuf") != "http/protobuf":
            raise ConfigError(f"{name}: Cari sends traces over OTLP/HTTP only (http/protobuf)")
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.instrumentation import asgi  # noqa: F401 (the HTTP spans need it)
        from opentelemetry.sdk.resources import SERVICE_NAME as NAME
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        variable = next(name for name in ENDPOINTS if os.environ.get(name))
        raise ConfigError(
            f"{variable} is set but tracing is not installed ({exc.name} is missing): "
            "pip install -e '.[otel]' in Cari's checkout, or unset it"
        ) from None

    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get(NAME, "")).startswith("unknown_service"):  # the SDK's stand-in
        resource = resource.merge(Resource({NAME: SERVICE_NAME}))
    # The provider reads the sampler (OTEL_TRACES_SAMPLER) and OTEL_SDK_DISABLED, the processor
    # its batching (OTEL_BSP_*), the exporter its endpoint, headers and timeout; spans still
    # queued are sent when the process exits.
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _start_span = trace.get_tracer("cari").start_as_current_span

    make = logging.getLogRecordFactory()

    def with_trace_ids(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        context = trace.get_current_span().get_span_context()
        if context.is_valid:  # a JSON log line then names its trace (`extra` fields)
            record.trace_id = trace.format_trace_id(context.trace_id)
            record.span_id = trace.format_span_id(context.span_id)
        return record

    logging.setLogRecordFactory(with_trace_ids)
