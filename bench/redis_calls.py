"""Redis calls counted inside a bench's worker process, at redis-py's connection.

`count_redis` patches redis-py's asyncio connection so every packet sent (one command, or a
whole pipeline) counts as a round trip and every command packed counts by name (a script by
its first key's prefix, which says whose it is: `oncereply:pr-budget`, `saq:…`); SAQ's, the
heartbeat's and ours alike. `redis_figures` turns the counts into figures per delivery.
"""

from __future__ import annotations

from collections import Counter
from typing import Any


def redis_command_name(args: tuple[Any, ...]) -> str:
    """A command's name for the counts; a script's (EVALSHA, EVAL) with its first key's
    prefix, which says whose it is (`oncereply:pr-budget`, `saq:…`)."""
    name = _text(args[0]).upper() if args else "?"
    if name in ("EVALSHA", "EVAL") and len(args) > 3 and int(args[2]) > 0:
        prefix = ":".join(_text(args[3]).split(":")[:2])
        return f"{name} {prefix.rstrip('0123456789:')}"
    return name


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def redis_figures(counted: dict[str, Any], per: int) -> dict[str, Any]:
    """Redis round trips and commands per delivery, counted in the worker process (SAQ's,
    the heartbeat's and ours), with the commands by name."""
    by_name = {
        key.removeprefix("redis:"): round(value / per, 2)
        for key, value in sorted(counted.items(), key=lambda kv: -kv[1])
        if key.startswith("redis:")
    }
    return {
        "round_trips_per_delivery": round(counted.get("redis_round_trips", 0) / per, 2),
        "commands_per_delivery": round(counted.get("redis_commands", 0) / per, 2),
        "commands_by_name_per_delivery": by_name,
    }


def count_redis(counts: Counter[str]) -> None:
    """Redis, counted at redis-py's connection: a round trip per packet sent (one command, or
    a whole pipeline), and the commands in it, by name."""
    from redis.asyncio.connection import AbstractConnection

    send_packed = AbstractConnection.send_packed_command
    pack = AbstractConnection.pack_command

    async def counted_send(conn: Any, *args: Any, **kwargs: Any) -> Any:
        counts["redis_round_trips"] += 1
        return await send_packed(conn, *args, **kwargs)

    def counted_pack(conn: Any, *args: Any) -> Any:
        counts["redis_commands"] += 1
        counts[f"redis:{redis_command_name(args)}"] += 1
        return pack(conn, *args)

    AbstractConnection.send_packed_command = counted_send  # type: ignore[method-assign,assignment]
    AbstractConnection.pack_command = counted_pack  # type: ignore[method-assign,assignment]
