"""The landing page of the dashboard."""

from __future__ import annotations

from litestar import get
from litestar.response import Template


@get("/", name="home")
async def home() -> Template:
    return Template("home.html")
