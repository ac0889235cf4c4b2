# Trace Explorer server image. Build:  docker compose build   (or: docker build -t trace-explorer .)
# Add PyTorch (for `trace-explorer demo` inside the container):  --build-arg WITH_TORCH=1
#
# Two stages: the first builds the wheel (templates/ and static/ mapped into the package), the second
# installs only that wheel with its `team` extra (PostgreSQL, job queue, S3: the image is the team server's), so
# the image runs exactly what `pip install "trace-explorer-*.whl[team]"` gives a user.
FROM python:3.11-slim AS wheel

ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# a C compiler for the C helpers (hatch_build.py compiles explorer/ingest/chrome/_kscan.c and explorer/analysis/_nest.c
# into the wheel)
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md hatch_build.py ./
COPY explorer ./explorer
COPY api ./api
COPY templates ./templates
COPY static ./static
RUN pip wheel --no-deps -w /dist .

FROM python:3.11-slim

ARG WITH_TORCH=0
# CPU wheels by default; the profiling itself happens on the accelerator box, not in this container.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    EXPLORER_DATA_DIR=/data \
    EXPLORER_HOST=0.0.0.0 \
    EXPLORER_PORT=8000

COPY --from=wheel /dist /dist

# The wheel, not a checkout: templates and static assets come from inside the installed package.
RUN wheel="$(ls /dist/trace_explorer-*.whl)" \
    && if [ "$WITH_TORCH" = "1" ]; then \
        pip install --extra-index-url "$TORCH_INDEX_URL" "${wheel}[team,torch]"; \
    else \
        pip install "${wheel}[team]"; \
    fi \
    && rm -rf /dist \
    && useradd --create-home --uid 10001 explorer \
    && mkdir -p /data && chown explorer:explorer /data

USER explorer
WORKDIR /home/explorer
VOLUME ["/data"]
EXPOSE 8000

# No curl in slim images: the healthcheck is a one-line Python request to the liveness endpoint.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/-/health', timeout=4)"]

# Binding 0.0.0.0 inside the container means the server requires EXPLORER_TOKEN (set it in compose / -e).
CMD ["trace-explorer", "serve", "--host", "0.0.0.0", "--port", "8000"]
