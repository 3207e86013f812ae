"""Declarative base with a constraint naming convention, and the column types models share.

The naming convention makes every constraint and index name deterministic, which keeps
`alembic check` free of drift and lets code name a unique constraint in `ON CONFLICT`.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from sqlalchemy import BigInteger, DateTime, Enum, Identity, MetaData, func
from sqlalchemy.orm import DeclarativeBase, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


BigId = Annotated[int, mapped_column(BigInteger, Identity(), primary_key=True)]
Timestamp = Annotated[datetime, mapped_column(DateTime(timezone=True))]
CreatedAt = Annotated[
    datetime, mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
]
UpdatedAt = Annotated[
    datetime,
    mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now(), nullable=False
    ),
]


def str_enum(enum_cls: type[StrEnum], name: str) -> Enum:
    """A VARCHAR column with a CHECK constraint: cheaper to extend than a native enum type."""
    return Enum(
        enum_cls,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=max(32, *(len(member.value) for member in enum_cls)),
        values_callable=lambda members: [member.value for member in members],
        validate_strings=True,
    )
