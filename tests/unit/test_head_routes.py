"""Every route that answers GET answers HEAD too (`app.web.reads.get_or_head`): monitors,
link checkers and previewers send HEAD, and a 405 tells them the page is gone. The answer
itself (same status and headers, no body) is checked against a running server by the route
sweep (`tests/fuzz/test_routes.py`)."""

from __future__ import annotations

from litestar.routes import HTTPRoute

from app.asgi import create_app
from app.settings import load_settings
from tests.support.infra import base_env


def test_every_get_route_takes_head() -> None:
    app = create_app(load_settings(base_env("postgresql://head@127.0.0.1/head", "redis://x")))
    routes = [route for route in app.routes if isinstance(route, HTTPRoute)]
    read = [route for route in routes if "GET" in route.methods]
    assert len(read) >= 20, [route.path for route in routes]
    missing = sorted(route.path for route in read if "HEAD" not in route.methods)
    assert missing == [], f"GET routes refusing HEAD (use app.web.reads.get_or_head): {missing}"
