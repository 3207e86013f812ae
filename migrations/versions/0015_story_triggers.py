"""Story triggers: campaigns answer comments, story replies or story mentions; deliveries of
both new kinds

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_KINDS = ("comment", "message", "postback", "follow_up")
_NEW_KINDS = (*_OLD_KINDS, "story_reply", "story_mention")


def _kinds_check(kinds: tuple[str, ...]) -> str:
    return "trigger_kind IN (" + ", ".join(f"'{kind}'" for kind in kinds) + ")"


def upgrade() -> None:
    op.add_column(
        "campaigns",
        sa.Column(
            "trigger",
            sa.Enum(
                "comments",
                "story_replies",
                "story_mentions",
                name="campaign_trigger",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            server_default="comments",
            nullable=False,
        ),
    )
    op.add_column("campaigns", sa.Column("story_id", sa.String(length=32), nullable=True))
    op.add_column(
        "campaigns", sa.Column("story_expires_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.drop_constraint(op.f("ck_dm_logs_trigger_kind"), "dm_logs", type_="check")
    op.create_check_constraint(op.f("ck_dm_logs_trigger_kind"), "dm_logs", _kinds_check(_NEW_KINDS))


def downgrade() -> None:
    op.execute("DELETE FROM dm_logs WHERE trigger_kind IN ('story_reply', 'story_mention')")
    op.drop_constraint(op.f("ck_dm_logs_trigger_kind"), "dm_logs", type_="check")
    op.create_check_constraint(op.f("ck_dm_logs_trigger_kind"), "dm_logs", _kinds_check(_OLD_KINDS))
    op.drop_column("campaigns", "story_expires_at")
    op.drop_column("campaigns", "story_id")
    op.drop_column("campaigns", "trigger")
