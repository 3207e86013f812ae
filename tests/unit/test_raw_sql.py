"""`psycopg_sql`: a statement written with `:name` parameters, run through psycopg."""

from __future__ import annotations

import re

import pytest

from app.db.raw import psycopg_sql
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
