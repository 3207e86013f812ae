"""The long-lived connections a process holds: database engine, Redis, the job queue.

Built once at start (web lifespan, worker startup, CLI) from `Settings` and the job options
(`app.jobs.registry.JOB_OPTIONS`, which the queue stamps on what it enqueues), and closed at
exit; passed explicitly to whatever needs them rather than kept in module globals.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.crypto import TokenCipher
from app.db.engine import create_engine, create_sessionmaker
from app.instagram.graph import GraphClient
from app.queue import JobName, JobOptions, JobQueue, open_queue
from app.settings import Settings

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Resources:
    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    redis: Redis
    queue: JobQueue
    cipher: TokenCipher
    graph: GraphClient

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        jobs: Mapping[JobName, JobOptions],
        db_pool_size: int = 10,
        db_max_overflow: int = 10,
        db_pre_ping: bool = True,
    ) -> Resources:
        engine = create_engine(
            settings.database_url,
            pool_size=db_pool_size,
            max_overflow=db_max_overflow,
            pre_ping=db_pre_ping,
        )
        # SAQ closes the client it is given on disconnect, so it gets its own.
        queue = open_queue(settings, jobs)
        await queue.connect()
        return cls(
            settings=settings,
            engine=engine,
            sessionmaker=create_sessionmaker(engine),
            redis=Redis.from_url(
                settings.redis_url,
                socket_connect_timeout=3,
                socket_timeout=5,
                health_check_interval=30,
            ),
            queue=queue,
            cipher=TokenCipher(settings.encryption_key, settings.encryption_old_keys),
            graph=GraphClient.create(settings.graph_api_base, timeout_s=settings.send_timeout_s),
        )

    async def close(self) -> None:
        """Close everything, each part even when another fails (Redis may be down at exit)."""
        closers = (self.graph.aclose, self.queue.disconnect, self.redis.aclose, self.engine.dispose)
        for close in closers:
            try:
                await close()
            except Exception as exc:  # noqa: BLE001 - the rest must still be closed
                logger.warning("closing %s failed: %s", close.__qualname__, exc)
