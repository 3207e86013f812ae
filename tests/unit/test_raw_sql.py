"""`psycopg_sql`: a statement written with `:name` parameters, run through psycopg."""

from __future__ import annotations

import re

import pytest
from psycopg.adapt import Transformer

from app.db.raw import PSYCOPG_CACHED_LENGTH, psycopg_sql
from app.delivery.send import claims, recording


def test_parameters_become_psycopgs_and_casts_and_strings_stay() -> None:
    sql = (
        "UPDATE t SET e = COALESCE(e, '{}'::jsonb) || CAST(:evidence AS jsonb), "
        "k = 'followup:' || id WHERE id = :id AND at <= now() + interval '1 second'"
    )
    assert psycopg_sql(sql) == (
        "UPDATE t SET e = COALESCE(e, '{}'::jsonb) || CAST(%(evidence)s AS jsonb), "
        "k = 'followup:' || id WHERE id = %(id)s AND at <= now() + interval '1 second'"
    )


def test_a_literal_percent_is_refused() -> None:
    with pytest.raises(ValueError, match="%"):
        psycopg_sql("SELECT * FROM t WHERE name LIKE 'a%' AND id = :id")


def test_the_delivery_statements_keep_no_sqlalchemy_parameter() -> None:
    statements = [
        claims._LOAD,
        claims._CLAIM_PRIVATE,
        claims._CLAIM_PUBLIC,
        *claims._MARK_REQUEST_SENT.values(),
        *recording._RECORD.values(),
    ]
    for sql in statements:
        assert re.search(r"(?<![:\w\\]):\w+(?!:)", sql) is None, "a :name psycopg won't bind"
        assert "%(id)s" in sql


def test_indentation_goes_and_the_statement_stays_within_psycopgs_cache() -> None:
    from psycopg import _queries

    assert PSYCOPG_CACHED_LENGTH == _queries.MAX_CACHED_STATEMENT_LENGTH
    assert psycopg_sql("\n    SELECT 1\n      FROM t\n    WHERE id = :id\n") == (
        "SELECT 1\nFROM t\nWHERE id = %(id)s"
    )
    with pytest.raises(ValueError, match="again on every execution"):
        psycopg_sql(f"SELECT {'c, ' * 1500}id FROM t WHERE id = :id")  # noqa: S608 - constants
    with pytest.raises(ValueError, match="spans lines"):
        psycopg_sql("SELECT 'a\n  b' FROM t WHERE id = :id")


class _AnyParameter(dict[str, object]):
    def __missing__(self, key: str) -> None:
        return None


def test_the_delivery_statements_are_parsed_once() -> None:
    """psycopg caches what it parsed of a statement, by its text, up to a length: each
    delivery statement is within it, so it is not parsed again on every execution."""
    from psycopg._queries import PostgresQuery, _query2pg

    for sql in (claims._CLAIM_PRIVATE, *recording._RECORD.values(), claims._LOAD):
        _query2pg.cache_clear()
        for _ in range(2):
            PostgresQuery(Transformer()).convert(sql, _AnyParameter())
        assert _query2pg.cache_info().hits == 1
