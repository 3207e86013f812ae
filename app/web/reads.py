"""`get_or_head`: the route decorator for everything that is only read (pages, downloads,
health, shared reports). It answers GET, and HEAD the same way: HTTP asks a server to, and
monitors, link checkers and previewers send HEAD. The handler runs as for GET (same guards,
same status, same headers); the HTTP server (uvicorn) drops the body of an answer to HEAD and
keeps its headers. Litestar's own `get` takes GET alone, so every GET route here uses this
(`tests/unit/test_head_routes.py` checks); the ASGI routes (the webhook, `/go/…`) and the
static files answer HEAD themselves."""

from __future__ import annotations

from functools import partial

from litestar import route
from litestar.enums import HttpMethod

READ_METHODS = [HttpMethod.GET, HttpMethod.HEAD]

get_or_head = partial(route, http_method=READ_METHODS)
