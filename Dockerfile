# spacy-delink's HTTP service, `delink serve` (docs/serve.md).
#   docker build -t spacy-delink .
#   docker run --read-only --tmpfs /tmp -p 127.0.0.1:8080:8080 \
#     -v "$PWD/training:/data:ro" -v "$PWD/secrets:/run/secrets:ro" spacy-delink
# The index is mounted read-only at /data/index; its key and the API key are secrets
# (files under /run/secrets, as docker compose and swarm mount them), never image layers.

FROM python:3.11-slim AS wheel
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY spacy_delink ./spacy_delink
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
# Where the secrets are mounted: paths, not keys (hence the ignore).
# hadolint ignore=DL3064
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NUMBA_CACHE_DIR=/home/delink/numba-cache \
    DELINK_KEY_FILE=/run/secrets/delink_index_key \
    DELINK_API_KEY_FILE=/run/secrets/delink_api_key
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin delink
COPY --from=wheel /wheels /wheels
# The wheel built above (by path: never a same-named package from an index), with the [serve] extra.
# hadolint ignore=DL3013
RUN for wheel in /wheels/spacy_delink-*.whl; do pip install --no-cache-dir "${wheel}[serve]"; done && rm -rf /wheels
USER 10001
WORKDIR /home/delink
# The numba kernels compiled into the image, so a container starts in seconds.
RUN python -m spacy_delink.serve.warmup
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=4).status != 200)"]
ENTRYPOINT ["delink", "serve"]
CMD ["/data/index", "--host", "0.0.0.0", "--port", "8080"]
