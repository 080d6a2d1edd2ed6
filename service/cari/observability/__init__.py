"""What a running Cari tells its operators: Prometheus metrics (`metrics`), JSON logs with
request ids (`logs`) and OpenTelemetry traces (`tracing`)."""
