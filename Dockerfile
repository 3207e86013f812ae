# One image, two commands: `web` (dashboard + webhooks) and `worker` (SAQ jobs).
# Migrations run when the web container starts (never at build: the database is not there).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    UV_PYTHON_DOWNLOADS=never \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PROJECT_ENVIRONMENT=/opt/venv \
    PATH="/opt/venv/bin:$PATH"

RUN pip install --no-cache-dir "uv==0.13.9" \
 && useradd --system --uid 10001 --home-dir /srv/oncereply oncereply

WORKDIR /srv/oncereply

# Dependencies first, so code changes do not reinstall them.
COPY pyproject.toml uv.lock ./
RUN uv sync --frozen --no-dev --no-install-project

COPY alembic.ini ./
COPY app ./app
COPY worker ./worker
COPY migrations ./migrations
COPY templates ./templates
COPY static ./static

USER oncereply
EXPOSE 8000

# `docker run IMAGE web` or `docker run IMAGE worker`; settings come from the environment.
ENTRYPOINT ["/bin/sh", "-c", "case \"$0\" in \
  web) python -m app migrate && exec python -m app serve --host 0.0.0.0 --port \"${PORT:-8000}\" ;; \
  worker) exec python -m worker ;; \
  *) exec \"$0\" \"$@\" ;; esac"]
CMD ["web"]

# Probes the `web` command on the port it serves ($PORT, default 8000). A `worker` container
# has no HTTP port: its check is `python -m app worker-health` (set in docker-compose.yml; with
# plain docker: --health-cmd "python -m app worker-health").
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s \
  CMD ["python", "-c", "import os, sys, urllib.request; url = 'http://127.0.0.1:%s/health/live' % os.environ.get('PORT', '8000'); sys.exit(0 if urllib.request.urlopen(url, timeout=4).status == 200 else 1)"]
