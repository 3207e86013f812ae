"""`app.db.bounds`: what a request may carry as an id, a number or a day."""

from __future__ import annotations

from datetime import date

import pytest

from app.db.bounds import BIGINT_MAX, LAST_DAY, parse_day, parse_id, parse_int
from app.instagram.webhook_payload import MAX_DEPTH, EnvelopeError, check_object, decode_body


@pytest.mark.parametrize(
    "raw",
    ["", "0", "-1", "+1", " 1", "1 ", "1_0", "²", "١٢", "1.0", "1e3", str(BIGINT_MAX + 1), None, 5],
)
def test_what_is_no_id(raw: object) -> None:
    assert parse_id(raw) is None


def test_ids_up_to_bigint() -> None:
    assert parse_id("1") == 1
    assert parse_id(str(BIGINT_MAX)) == BIGINT_MAX
    assert parse_id("0" * 19 + "1") is None  # longer than any bigint's digits


def test_numbers_within_their_range() -> None:
    assert parse_int("-1000", low=-1000, high=1000) == -1000
    assert parse_int("1001", low=-1000, high=1000) is None
    assert parse_int("-", low=-1, high=1) is None
    assert parse_int("9" * 5000, low=0, high=BIGINT_MAX) is None


@pytest.mark.parametrize(
    "raw", ["9999-12-31", "10000-01-01", "1969-12-31", "2024-1-1", "２０２４-01-01"]
)
def test_days_out_of_range_or_shape(raw: str) -> None:
    assert parse_day(raw) is None


def test_days_in_range() -> None:
    assert parse_day("2024-02-29") == date(2024, 2, 29)
    assert parse_day(LAST_DAY.isoformat()) == LAST_DAY


@pytest.mark.parametrize("depth", [MAX_DEPTH, MAX_DEPTH + 1, 999, 1000, 100_000])
def test_webhook_bodies_nested_deeper_than_the_bound_are_refused(depth: int) -> None:
    body = b'{"a":' * (depth - 1) + b"{}" + b"}" * (depth - 1)
    if depth <= MAX_DEPTH:
        assert decode_body(body)
    else:
        with pytest.raises(EnvelopeError, match="nested deeper"):
            decode_body(body)


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH])
def test_nesting_counts_lists_and_objects_alike(depth: int) -> None:
    inner = b"[" * (depth // 2 - 1) + b"[]" + b"]" * (depth // 2 - 1)
    body = (
        b'{"a":' * (depth - depth // 2 - 1)
        + b'{"b":'
        + inner
        + b"}"
        + b"}" * (depth - depth // 2 - 1)
    )
    siblings = b'{"wide":[' + b",".join([b"{}"] * 1000) + b'],"deep":' + body + b"}"
    if depth + 1 <= MAX_DEPTH:
        assert decode_body(siblings)
    else:
        with pytest.raises(EnvelopeError, match="nested deeper"):
            decode_body(siblings)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"[]", "not a JSON object"),
        (b'"text"', "not a JSON object"),
        (b'{"a": [1, 2,}', "not JSON"),
        (b'{"a": 1} trailing', "not JSON"),
        (b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested deeper"),
    ],
)
def test_the_syntax_check_refuses_what_is_no_json_object(raw: bytes, problem: str) -> None:
    with pytest.raises(EnvelopeError, match=problem):
        check_object(raw)


def test_the_syntax_check_passes_any_json_object() -> None:
    check_object(b'{"object": "instagram", "entry": [{"id": "1", "x": [1.5, true, null]}]}')
    check_object(b"{}")
