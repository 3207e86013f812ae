"""Reading worker heartbeats written by other versions of the worker (rolling deploys)."""

from __future__ import annotations

import json
from dataclasses import asdict

from app.heartbeat import Heartbeat, parse_heartbeat

BEAT = Heartbeat(
    worker_id="host-a:41:abc123",
    pid=41,
    host="host-a",
    version="0.1.0",
    started_at=1_700_000_000.0,
    beat_at=1_700_000_030.0,
    jobs_done=7,
    last_error=None,
)


def test_a_beat_round_trips() -> None:
    assert parse_heartbeat(json.dumps(asdict(BEAT))) == BEAT


def test_fields_from_a_newer_worker_are_ignored() -> None:
    newer = {**asdict(BEAT), "queue_lag_s": 0.4, "labels": {"zone": "b"}}
    assert parse_heartbeat(json.dumps(newer).encode()) == BEAT


def test_an_unreadable_beat_is_skipped_not_raised() -> None:
    missing_field = {key: value for key, value in asdict(BEAT).items() if key != "jobs_done"}
    assert parse_heartbeat(json.dumps(missing_field)) is None
    assert parse_heartbeat(b"not json") is None
    assert parse_heartbeat(b"[1, 2]") is None
