"""The Litestar application factory for the web process.

`create_app(settings)` wires templates, static files, CSRF, error pages and the routes, and
opens the process resources (database, Redis, the queue with the job registry's options) in
the lifespan. `python -m app serve` loads the settings first, so a bad setting stops the
process with one line, then serves this.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path

from litestar import Litestar
from litestar.config.csrf import CSRFConfig
from litestar.di import Provide
from litestar.exceptions import HTTPException
from litestar.plugins.htmx import HTMXPlugin
from litestar.static_files import create_static_files_router
from litestar.stores.redis import RedisStore
from redis.asyncio import Redis

from app.auth.current import LoginRequired, provide_viewer
from app.auth.sessions import SESSION_STORE, session_config, session_store
from app.jobs.registry import JOB_OPTIONS
from app.resources import Resources
from app.settings import Settings, load_settings
from app.web.accounts import AccountsController
from app.web.auth import AuthController
from app.web.campaigns import campaigns_router
from app.web.deps import close_request_session, provide_db_session, provide_resources
from app.web.edge import (
    addressable_host,
    path_ids_in_range,
    readable_csrf_tokens,
    readable_forms,
)
from app.web.errors import http_exception_handler, internal_error_handler, login_redirect
from app.web.health import HealthController
from app.web.invite_link import InviteController
from app.web.links import tracked_link, tracked_links_lifespan
from app.web.log import log_router
from app.web.meta_callbacks import MetaCallbacksController
from app.web.metrics import MetricsController
from app.web.overview import home
from app.web.report import shared_report
from app.web.same_origin import same_origin_only
from app.web.security_headers import security_headers
from app.web.setup_doctor import SetupDoctorController
from app.web.team import switch_workspace, team_router
from app.web.templating import template_config
from app.web.webhooks import instagram_webhook, webhook_intake_lifespan

STATIC_DIR = Path(__file__).resolve().parents[1] / "static"
FORM_MAX_BODY_BYTES = 1024 * 1024
# Machine endpoints authenticate by signature or carry no state change; a shared report
# (`/r/…`) is read-only and must set no cookie.
CSRF_EXEMPT = ["^/webhooks/", "^/meta/", "^/health$", "^/static/", "^/r/"]
CSRF_COOKIE = "csrftoken"
# Under https: a cookie only this exact origin can set (no other port, no subdomain).
CSRF_COOKIE_SECURE = "__Host-csrftoken"


def create_app(settings: Settings | None = None) -> Litestar:
    settings = settings or load_settings()
    # Sessions live in Redis under their own namespace; registered explicitly, because an
    # unknown store name silently becomes per-process memory.
    sessions_redis = Redis.from_url(settings.redis_url, socket_connect_timeout=3, socket_timeout=5)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncGenerator[None, None]:
        if not isinstance(app.stores.get(SESSION_STORE), RedisStore):
            raise TypeError("the sessions store must be Redis")
        resources = await Resources.open(settings, jobs=JOB_OPTIONS)
        app.state.resources = resources
        try:
            yield
        finally:
            await resources.close()
            await sessions_redis.aclose()

    csrf = CSRFConfig(
        secret=settings.secret_key,
        cookie_secure=settings.cookie_secure,
        cookie_samesite="lax",
        # Forms carry the token in the page; no script needs to read the cookie.
        cookie_httponly=True,
        cookie_name=CSRF_COOKIE_SECURE if settings.cookie_secure else CSRF_COOKIE,
        exclude=CSRF_EXEMPT,
    )
    return Litestar(
        route_handlers=[
            HealthController,
            home,
            AuthController,
            AccountsController,
            campaigns_router,
            log_router,
            team_router,
            switch_workspace,
            InviteController,
            instagram_webhook,
            MetaCallbacksController,
            SetupDoctorController,
            MetricsController,
            tracked_link,
            shared_report,
            create_static_files_router(path="/static", directories=[STATIC_DIR], name="static"),
        ],
        # Entered in order, left in reverse: the webhook intake stops before the resources.
        lifespan=[lifespan, webhook_intake_lifespan, tracked_links_lifespan],
        dependencies={
            "resources": Provide(provide_resources, sync_to_thread=False),
            "db_session": Provide(provide_db_session, sync_to_thread=False),
            "viewer": Provide(provide_viewer),
        },
        stores={SESSION_STORE: session_store(sessions_redis)},
        middleware=[
            addressable_host,
            session_config(secure=settings.cookie_secure).middleware,
            close_request_session,
            path_ids_in_range,
            readable_forms(FORM_MAX_BODY_BYTES),
            same_origin_only(settings.public_base_url, CSRF_EXEMPT),
            readable_csrf_tokens(csrf),
        ],
        plugins=[HTMXPlugin()],
        before_send=[security_headers(settings)],
        # No OpenAPI pages: the dashboard is no API, and they would load scripts from a CDN.
        openapi_config=None,
        template_config=template_config(),
        csrf_config=csrf,
        exception_handlers={
            LoginRequired: login_redirect,
            HTTPException: http_exception_handler,
            Exception: internal_error_handler,
        },
        # Dashboard forms are a few kilobytes; the webhook reads its own body under its own cap.
        request_max_body_size=FORM_MAX_BODY_BYTES,
        debug=False,
        # Logging is ours (app.logs): Litestar's default config would replace the root
        # handler, and with it the filter that scrubs tokens from every log line.
        logging_config=None,
    )
