# OnceReply — the two commands a newcomer types: `make dev` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

export UV_PYTHON_DOWNLOADS := never
# Where `pip install --user` (the install target's fallback) puts uv: later recipes find it.
export PATH := $(HOME)/.local/bin:$(PATH)
UV ?= uv
RUN := $(UV) run --frozen
# $(call smoke,module,name): run a bench/chaos module's smoke size into test-results/name.json;
# it fails on wrong answers (never on speed) and then shows what it printed.
smoke = mkdir -p test-results && $(RUN) python -m $(1) --smoke > test-results/$(2).json \
  && echo "$(2) smoke: ok (test-results/$(2).json)" || { cat test-results/$(2).json; exit 1; }
DEV_DB ?= oncereply
# make dev's ports: `make dev WEB_PORT=8001 SANDBOX_PORT=8101` (REDIS_URL=… picks another Redis
# than the .env's). A compose-style WEB_PORT such as 127.0.0.1:8000 means its port.
WEB_PORT ?= 8000
SANDBOX_PORT ?= 8100
# make dev copies each process's output here (git-ignored) to show it when a start fails.
DEV_LOGS := .dev

.PHONY: help install services env migrate dev web worker sandbox test lint format typecheck fuzz \
        migrate-check unit integration e2e chromium clean bench-deliver bench-burst chaos bench bench-smoke \
        bench-log bench-liveness bench-clicks bench-matching bench-report \
        test-lane-suites test-lane-delivery test-lane-browser

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

install: ## install the pinned packages into .venv (bootstraps uv with pip when absent)
	@command -v $(UV) >/dev/null || { echo "installing uv with pip"; \
	  if ! out=$$(python3 -m pip install --quiet uv 2>&1); then \
	    if ! grep -q externally-managed-environment <<<"$$out"; then echo "$$out"; exit 1; fi; \
	    echo "this Python is managed by Debian (PEP 668): installing uv for this user instead"; \
	    python3 -m pip install --quiet --user --break-system-packages uv || exit 1; \
	  fi; \
	  command -v $(UV) >/dev/null || { echo "uv was installed but is not on PATH"; exit 1; }; }
	@$(UV) sync --frozen --quiet

services: ## make sure PostgreSQL and Redis answer on loopback; create the dev database
	@REDIS_PORT=$$(python3 -c 'import os, urllib.parse as u; \
	  print(u.urlsplit(os.environ.get("REDIS_URL") or "redis://127.0.0.1").port or 6379)') \
	  .ci/services $(DEV_DB)

env: .env ## write a local .env with generated secrets (kept if it exists)

.env:
	@echo "writing .env with fresh secrets (it is git-ignored)"
	@umask 077; { \
	  echo "# Local development settings, written by 'make env'. Never commit this file."; \
	  echo "DATABASE_URL=postgresql://postgres@127.0.0.1:5432/$(DEV_DB)"; \
	  echo "REDIS_URL=redis://127.0.0.1:6379/0"; \
	  echo "SECRET_KEY=$$(python3 -c 'import secrets; print(secrets.token_hex(32))')"; \
	  echo "ENCRYPTION_KEY=$$(python3 -c 'import secrets; print(secrets.token_hex(32))')"; \
	  echo "INSTAGRAM_APP_ID=$$(python3 -c 'import secrets; print(secrets.randbelow(10**15) + 10**15)')"; \
	  echo "INSTAGRAM_APP_SECRET=$$(python3 -c 'import secrets; print(secrets.token_hex(16))')"; \
	  echo "META_APP_SECRET=$$(python3 -c 'import secrets; print(secrets.token_hex(16))')"; \
	  echo "WEBHOOK_VERIFY_TOKEN=$$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')"; \
	  echo "PUBLIC_BASE_URL=http://localhost:8000"; \
	  echo "GRAPH_API_BASE=http://127.0.0.1:8100/v25.0"; \
	  echo "INSTAGRAM_OAUTH_BASE=http://127.0.0.1:8100"; \
	  echo "IMAGE_CHECK_ALLOW_LOOPBACK=true"; \
	  echo "DEMO_EMAIL=demo@oncereply.local"; \
	  echo "DEMO_PASSWORD=$$(python3 -c 'import secrets; print(secrets.token_urlsafe(12))')"; \
	} > .env

migrate: install ## apply every migration to the database in DATABASE_URL (.env)
	@$(RUN) alembic upgrade head

dev: install services .env migrate ## run web (:8000), worker and the Instagram sandbox (:8100); Ctrl-C stops all
	@redis_url="$${REDIS_URL:-}"; set -a; . ./.env; set +a; \
	if [ -n "$$redis_url" ]; then REDIS_URL="$$redis_url"; fi; \
	export IMAGE_CHECK_ALLOW_LOOPBACK="$${IMAGE_CHECK_ALLOW_LOOPBACK:-true}"; \
	web_port="$(WEB_PORT)"; web_port="$${web_port##*:}"; sandbox_port="$(SANDBOX_PORT)"; \
	if [ "$$web_port" != 8000 ]; then PUBLIC_BASE_URL="http://localhost:$$web_port"; fi; \
	if [ "$$sandbox_port" != 8100 ]; then \
	  GRAPH_API_BASE="http://127.0.0.1:$$sandbox_port/v25.0"; \
	  INSTAGRAM_OAUTH_BASE="http://127.0.0.1:$$sandbox_port"; fi; \
	ONCEREPLY_PASSWORD="$$DEMO_PASSWORD" $(RUN) python -m app create-user --email "$$DEMO_EMAIL" \
	  --workspace "Demo workspace" --reset-password || exit 1; \
	mkdir -p $(DEV_LOGS); \
	stop() { trap - INT TERM EXIT; kill $$(jobs -p) 2>/dev/null; wait; echo; echo "stopped web, worker and sandbox"; }; \
	trap 'stop; exit 130' INT; trap 'stop; exit 143' TERM; trap stop EXIT; \
	SANDBOX_INSTAGRAM_APP_ID="$$INSTAGRAM_APP_ID" SANDBOX_INSTAGRAM_APP_SECRET="$$INSTAGRAM_APP_SECRET" \
	SANDBOX_META_APP_SECRET="$$META_APP_SECRET" SANDBOX_WEBHOOK_VERIFY_TOKEN="$$WEBHOOK_VERIFY_TOKEN" \
	SANDBOX_WEBHOOK_CALLBACK_URL="http://127.0.0.1:$$web_port/webhooks/instagram" \
	SANDBOX_PUBLIC_URL="http://127.0.0.1:$$sandbox_port" \
	  $(RUN) python -m sandbox --port $$sandbox_port > >(tee -i $(DEV_LOGS)/sandbox.log) 2>&1 & \
	sandbox_pid=$$!; \
	$(RUN) python -m app serve --host 0.0.0.0 --port $$web_port > >(tee -i $(DEV_LOGS)/web.log) 2>&1 & \
	web_pid=$$!; \
	$(RUN) python -m worker > >(tee -i $(DEV_LOGS)/worker.log) 2>&1 & \
	worker_pid=$$!; \
	status=000; exited=; rm -f $(DEV_LOGS)/health.json; \
	for _ in $$(seq 1 120); do \
	  status=$$(curl -s -o $(DEV_LOGS)/health.json -w '%{http_code}' --max-time 2 \
	    http://127.0.0.1:$$web_port/health); \
	  [ "$$status" = 200 ] && break; \
	  for job in sandbox:$$sandbox_pid web:$$web_pid worker:$$worker_pid; do \
	    kill -0 "$${job#*:}" 2>/dev/null || { exited=$${job%%:*}; break 2; }; \
	  done; \
	  sleep 0.5; \
	done; \
	if [ "$$status" != 200 ]; then \
	  echo; \
	  if [ -n "$$exited" ]; then echo "make dev: FAILED: the $$exited process exited before /health answered"; \
	  else echo "make dev: FAILED: http://127.0.0.1:$$web_port/health did not answer 200 within 60 s (last status $$status)"; fi; \
	  if [ -s $(DEV_LOGS)/health.json ]; then echo "last /health answer: $$(head -c 600 $(DEV_LOGS)/health.json)"; fi; \
	  for name in sandbox web worker; do \
	    echo "--- last lines of the $$name process ($(DEV_LOGS)/$$name.log)"; tail -n 20 $(DEV_LOGS)/$$name.log; \
	  done; \
	  exit 1; \
	fi; \
	echo; \
	echo "  OnceReply   $$PUBLIC_BASE_URL   (log in as $$DEMO_EMAIL / $$DEMO_PASSWORD)"; \
	echo "  Sandbox     http://127.0.0.1:$$sandbox_port   (play a fan: comment, follow, read DMs)"; \
	echo "  Health      http://127.0.0.1:$$web_port/health"; \
	echo "  Logs        $(DEV_LOGS)/{web,worker,sandbox}.log"; \
	echo "  Ctrl-C stops everything."; \
	echo; \
	wait

# `make test` runs three lanes at once, of about the same length: unit + integration; delivery
# + the chaos and delivery smokes; browser + fuzz + the other smokes. Each lane's pytest runs
# and benchmarks make their own database, Redis db, ports and log files
# (tests/support/infra.py), as concurrent runs on one machine already do, so the lanes share
# nothing. Alone, the unit + integration + fuzz run kept about 0.6 of one core busy (it mostly
# waits on processes and time windows), so two cores finish the three lanes in about the time
# of the longest. A lane's output is shown whole when it ends (--output-sync): two lanes'
# lines never interleave. Runs other than the browser tests leave pytest-playwright out: it
# empties its output folder (test-results/playwright) when a run starts, which would drop the
# browser tests' failure screenshots.
TEST_LANES := test-lane-suites test-lane-delivery test-lane-browser
NO_BROWSER := -p no:playwright

# The lanes at once held up to 104 PostgreSQL connections here (the delivery lane's worker
# processes alone 72), past PostgreSQL's default of 100: a server that allows fewer than this
# runs them one after another (slower, but green). `.ci/run` reads this number too.
TEST_LANES_CONNECTIONS := 200
# The same default as tests/support/infra.py's PG_ADMIN_URL, and the same variable overrides it.
TEST_PG_ADMIN_URL ?= postgresql://postgres@127.0.0.1:5432/postgres

test: install services chromium ## everything CI runs: lint, types, migrations, unit + integration, e2e
	@$(MAKE) --no-print-directory -j3 --output-sync=target lint typecheck migrate-check
	@allowed=$$(psql "$(TEST_PG_ADMIN_URL)" -tAc 'SHOW max_connections' 2>/dev/null || echo 0); \
	if [ "$${allowed:-0}" -ge $(TEST_LANES_CONNECTIONS) ]; then \
	  echo "make test: $(words $(TEST_LANES)) lanes at once ($(TEST_LANES)); each shows its output when it ends"; \
	  $(MAKE) --no-print-directory -j$(words $(TEST_LANES)) --output-sync=target $(TEST_LANES); \
	else \
	  echo "make test: PostgreSQL allows $${allowed:-?} connections, fewer than the $(TEST_LANES_CONNECTIONS) that running the lanes at once needs: they run one after another (about twice as long). To run them at once: psql -c 'ALTER SYSTEM SET max_connections = $(TEST_LANES_CONNECTIONS)', then restart PostgreSQL"; \
	  $(MAKE) --no-print-directory -j1 $(TEST_LANES); \
	fi

# unit and the integration tests other than delivery's
test-lane-suites:
	@$(RUN) pytest $(NO_BROWSER) tests/unit tests/integration --ignore=tests/integration/delivery -q
	@echo "$@: passed at $$(date +%T)"

test-lane-delivery:
	@$(RUN) pytest $(NO_BROWSER) tests/integration/delivery -q
	@$(call smoke,bench.chaos,chaos)
	@$(call smoke,bench.deliver,bench-deliver)
	@echo "$@: passed at $$(date +%T)"

# the browser tests, the route fuzzer and the smokes not in the delivery lane
test-lane-browser:
	@$(RUN) pytest tests/e2e -q
	@$(RUN) pytest $(NO_BROWSER) tests/fuzz -q
	@$(call smoke,bench.burst,bench-burst)
	@$(call smoke,bench.ingest,bench-ingest)
	@$(call smoke,bench.log_queries,bench-log)
	@$(call smoke,bench.report_queries,bench-report)
	@$(call smoke,bench.clicks,bench-clicks)
	@$(call smoke,bench.matching,bench-matching)
	@echo "$@: passed at $$(date +%T)"

lint: ## ruff check, format check, and the import layering (lint-imports, pyproject.toml)
	@$(RUN) ruff check --quiet .
	@$(RUN) ruff format --check --quiet .
	@out=$$($(RUN) lint-imports --no-logo 2>&1) || { echo "$$out"; exit 1; }

format: ## apply ruff's fixes and formatting
	@$(RUN) ruff check --fix --quiet . || true
	@$(RUN) ruff format --quiet .

typecheck: ## mypy --strict on app/, worker/, sandbox/, bench/
	@$(RUN) mypy

migrate-check: ## upgrade a scratch database to head, then `alembic check` for model drift
	@db=oncereply_migrate_$$$$; \
	createdb -h 127.0.0.1 -U postgres $$db; \
	trap "dropdb -h 127.0.0.1 -U postgres --if-exists $$db" EXIT; \
	export ONCEREPLY_ENV_FILE= DATABASE_URL=postgresql://postgres@127.0.0.1:5432/$$db; \
	$(RUN) alembic upgrade head && $(RUN) alembic check

fuzz: install services ## the route fuzzer's long profile: every route, owner/member/stranger (about 30 min)
	@FUZZ_PROFILE=long $(RUN) pytest tests/fuzz -q
	@cat test-results/fuzz-routes.json

unit: install ## unit tests only
	@$(RUN) pytest tests/unit -q

integration: install services ## integration tests (real PostgreSQL, Redis and sandbox)
	@$(RUN) pytest tests/integration -q

e2e: install services chromium ## browser tests in Debian's Chromium
	@$(RUN) pytest tests/e2e -q

chromium: ## install Debian's chromium when it is absent (never `playwright install`)
	@command -v chromium >/dev/null || { echo "installing Debian's chromium"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }

bench: install services ## webhook ingestion benchmark, full size (JSON; about two minutes)
	@$(RUN) python -m bench.ingest

bench-smoke: install services ## the ingestion benchmark in seconds (make test runs it)
	@$(call smoke,bench.ingest,bench-ingest)

bench-log: install services ## delivery-log queries on 1,000,000 rows: index plans + timings (JSON)
	@$(RUN) python -m bench.log_queries $(if $(SMOKE),--smoke,)

bench-report: install services ## link taps, summary, funnel and chart queries on 1,000,000 deliveries + clicks (JSON)
	@$(RUN) python -m bench.report_queries $(if $(SMOKE),--smoke,)

bench-deliver: install services ## delivery benchmark: N comments through one worker process (JSON)
	@$(RUN) python -m bench.deliver $(if $(SMOKE),--smoke,)

bench-burst: install services ## viral surge: 50,000 comments drained at the cap, in deadline order (JSON)
	@$(RUN) python -m bench.burst $(if $(SMOKE),--smoke,)

bench-clicks: install services ## tracked-link redirect: rate, p50/p99 at 1,000/s, ratio to a bare endpoint (JSON)
	@$(RUN) python -m bench.clicks $(if $(SMOKE),--smoke,)

bench-matching: install ## keyword matching: µs of CPU per comment against 20 campaigns, text vs emoji/codes (JSON)
	@$(RUN) python -m bench.matching $(if $(SMOKE),--smoke,)

bench-liveness: install services ## SIGKILL a worker holding a job: seconds to "no worker" and to the job re-run (JSON)
	@$(RUN) python -m bench.liveness $(if $(SMOKE),--smoke,)

chaos: install services ## 10,000 comments via webhooks under faults, kills, Redis + PG restarts (JSON)
	@$(RUN) python -m bench.chaos $(if $(SMOKE),--smoke,)

clean: ## remove caches and test output
	rm -rf .pytest_cache .mypy_cache .ruff_cache .import_linter_cache test-results
