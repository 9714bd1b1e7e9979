# The image for running Postbag outside Lambda (docs/self-host.md): `postbag serve` (the
# default command), `postbag worker`, and `postbag migrate` as the init step.
#
#   docker build -f infra/server.Dockerfile -t postbag-server .
#   docker run -e POSTBAG_DATABASE_URL=... -e POSTBAG_SECRET_KEY=... postbag-server migrate
#   docker run -p 8080:8080 -e POSTBAG_DATABASE_URL=... -e POSTBAG_SECRET_KEY=... postbag-server
#   docker run -e POSTBAG_DATABASE_URL=... -e POSTBAG_SECRET_KEY=... postbag-server worker
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/app \
    POSTBAG_STORAGE_URL=file:///var/lib/postbag/files

# Runtime dependencies only: no dev tools, no embedded PostgreSQL (the `local` extra).
WORKDIR /app
COPY pyproject.toml README.md /app/
COPY core /app/core
COPY handlers /app/handlers
COPY local /app/local
RUN pip install --no-cache-dir /app \
    && pip uninstall --yes postbag

# The source stays in /app (on PYTHONPATH), next to the migrations `postbag migrate` applies.
COPY migrations /app/migrations

# Never root: an unprivileged user owning only the attachments folder.
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin postbag \
    && mkdir -p /var/lib/postbag/files \
    && chown -R postbag /var/lib/postbag
USER postbag

EXPOSE 8080
# `serve` raises its soft open-files limit to the hard one at start and fits its connection
# cap (POSTBAG_MAX_CONNECTIONS) under it: give the container a hard limit of at least a few
# thousand (`docker run --ulimit nofile=65536:65536`, docs/self-host.md#limits-on-clients).
# `postbag serve` answers /health; a worker has no HTTP (its health shows in any serve
# replica's /health as `live_workers`), so its deployments turn this check off.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % (os.environ.get('PORT') or 8080), timeout=4)"]

ENTRYPOINT ["python", "-m", "local.cli"]
CMD ["serve"]
