# Cari installed from its wheel, run by an unprivileged user. With the embedded PostgreSQL:
#   docker build -t cari . && docker run -p 8000:8000 -e CARI_API_KEYS=change-me -v cari-data:/data cari
# With a PostgreSQL server of your own, set DATABASE_URL (compose.yaml does).
#
# The base image is pinned by digest: python:3.12-slim's multi-platform index as other public
# projects pin it (not pulled on Cari's machines, which have no Docker engine). To move to a
# newer 3.12-slim: `docker buildx imagetools inspect python:3.12-slim` prints the index digest.
FROM python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea

# Cari needs no privileges: it runs as `cari`, and the embedded server keeps its data in /data,
# owned by that user (mount a volume there to keep it).
RUN useradd --create-home --uid 10001 cari && install -d -o cari -g cari /data
ENV CARI_DATA_DIR=/data

# The dependencies alone, from requirements.lock (every package pinned, with its files'
# hashes: pip refuses a file whose hash differs), in a layer of their own: a source change
# reuses it instead of installing them all again. The `otel` extra too: a platform that sets
# OTEL_EXPORTER_OTLP_ENDPOINT for every container gets traces, not a refusal to start.
# After changing pyproject.toml's dependencies, regenerate the lock (docs/operations.md):
#   uv pip compile pyproject.toml --extra otel --universal --python-version 3.12 \
#     --generate-hashes -o requirements.lock
WORKDIR /src
COPY requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements.lock

# Then the package, built into a wheel and installed as a user's would be (not editable; the SQL
# statements, migrations and the keyword extension's sources travel inside it). The checkout is
# not kept.
COPY pyproject.toml README.md ./
COPY service service
COPY sql sql
COPY alembic alembic
COPY ext/cari_bm25 ext/cari_bm25
RUN pip install --no-cache-dir --no-deps . && rm -rf /src

# Cari's keyword extension, built now as the first start would build it (cari.db.extension), into
# the data folder: a new volume mounted at /data starts with it, so the embedded server serves
# keyword search with it and the image needs no compiler (they leave in this same layer). On a
# folder mounted from the host, Cari finds no compiler, says so, and the SQL statement serves.
# The local model is converted there too (cari.e5.convert, checked against its known vectors),
# so a container starts serving without the first start's ~10 s conversion.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev make \
    && python -c 'from cari.db import embedded, extension; import pathlib, sys; sys.exit(extension.build(pathlib.Path("/data"), embedded.client_tool("pg_config")) is None)' \
    && python -c 'from cari.e5 import convert; import pathlib; convert.prepared(pathlib.Path("/data"))' \
    && chown -R cari:cari /data \
    && apt-get purge -y gcc libc6-dev make \
    && apt-get autoremove -y \
    && rm -rf /var/lib/apt/lists/*

USER cari
WORKDIR /home/cari
# A container is reached from outside: listen on every interface, which Cari allows only with
# CARI_API_KEYS set (or CARI_ALLOW_UNAUTHENTICATED=true), so a run without keys says so and stops.
ENV CARI_HOST=0.0.0.0
EXPOSE 8000
# Healthy once /readyz answers 200: the database is reachable and migrated (a 503 fails the
# check). No curl in a slim image: Python's urllib, on the port Cari listens on.
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
    CMD python -c 'import os, urllib.request; urllib.request.urlopen("http://127.0.0.1:%s/readyz" % os.environ.get("CARI_PORT", "8000"), timeout=4)'
CMD ["cari", "serve"]
