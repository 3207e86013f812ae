"""What the route fuzzer (tests/fuzz) works against: the web process, its log, the people, and
a neighbouring workspace whose rows none of them may see or change."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import httpx

from tests.support.loop_stalls import LogWatch
from tests.support.processes import Service


@dataclass(frozen=True)
class Neighbour:
    """Another workspace, seeded beside the fuzzed one: its rows' ids by the path parameter
    or field that names them, and words only its rows hold (names, emails, a comment)."""

    workspace_id: int
    ids: dict[str, int]  # account_id, campaign_id, dm_log_id, link_id, invite_id, user_id
    words: tuple[str, ...]


@dataclass
class Target:
    base_url: str
    web: Service
    log: LogWatch
    webhook_secret: str
    clients: dict[str, httpx.Client]
    csrf: dict[str, str]
    known_ids: list[int]
    neighbour: Neighbour
    database_url: str
    requests: Counter[str] = field(default_factory=Counter)
