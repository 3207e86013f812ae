"""``create_app(config) -> Litestar``: wires the sandbox's routes around one ``Sandbox`` object.

Specific routes (``/_admin``, ``/_inspect``, ``/oauth``, the fan pages) are matched before the
Graph catch-all, which answers every other path the way graph.instagram.com would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from litestar import Litestar
from litestar.datastructures import State
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.template.config import TemplateConfig

from sandbox import fan_page, oauth
from sandbox.admin import AdminController, action_error
from sandbox.config import SandboxConfig
from sandbox.fan_actions import ActionError
from sandbox.faults import FaultSpecError
from sandbox.graph import graph_api
from sandbox.inspect import InspectController
from sandbox.media_files import media_file
from sandbox.runtime import STATE_KEY, Sandbox

TEMPLATES = Path(__file__).parent / "templates"


def create_app(config: SandboxConfig | None = None, *, sandbox: Sandbox | None = None) -> Litestar:
    config = config or SandboxConfig()
    world = sandbox if sandbox is not None else Sandbox(config)

    @asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        if config.webhook_callback_url and config.webhook_verify_token:
            world.webhooks.register_in_background(
                config.webhook_callback_url, config.webhook_verify_token, config.webhook_sign_with
            )
        try:
            yield
        finally:
            await world.webhooks.aclose()

    return Litestar(
        route_handlers=[
            AdminController,
            InspectController,
            oauth.authorize_page,
            oauth.authorize_decision,
            oauth.access_token_exchange,
            fan_page.home,
            fan_page.fan_home,
            fan_page.fan_post,
            fan_page.fan_comment,
            fan_page.fan_delete,
            fan_page.fan_follow,
            fan_page.fan_inbox,
            fan_page.fan_dm,
            fan_page.fan_tap,
            fan_page.fan_story_reply,
            fan_page.fan_story_mention,
            fan_page.creator_story,
            media_file,
            graph_api,
        ],
        template_config=TemplateConfig(directory=TEMPLATES, engine=JinjaTemplateEngine),
        state=State({STATE_KEY: world}),
        lifespan=[lifespan],
        exception_handlers={ActionError: action_error, FaultSpecError: action_error},
        openapi_config=None,
        # The CLI configures logging; Litestar's default would reset the root logger to INFO
        # and log every outgoing webhook URL, verify token included.
        logging_config=None,
    )
