"""Request-scoped dependencies: the process resources and a database session per request."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from app.resources import Resources


def provide_resources(state: State) -> Resources:
    resources: Resources = state.resources
    return resources


async def provide_db_session(state: State) -> AsyncGenerator[AsyncSession, None]:
    # Nothing commits implicitly: a handler that writes commits itself, so a failed commit
    # surfaces as an error instead of a success page over lost data.
    resources: Resources = state.resources
    async with resources.sessionmaker() as session:
        yield session
