"""All models, imported here so `Base.metadata` is complete for Alembic and the tests."""

from app.db.base import Base
from app.db.models.campaigns import (
    Campaign,
    CampaignScope,
    CampaignStatus,
    CampaignTrigger,
    MatchMode,
)
from app.db.models.clicks import (
    LinkClick,
    LinkClickButtonPerson,
    LinkClickDay,
    LinkClickDayPerson,
    LinkClickHour,
    LinkClickPerson,
    LinkClickQuarter,
    LinkVisit,
)
from app.db.models.delivery import (
    AttemptClass,
    CampaignRecipient,
    DeliveryAttempt,
    DmLog,
    Leg,
    LegState,
    MessageKind,
    PersonClaim,
    PostbackDelivery,
    TriggerKind,
)
from app.db.models.delivery_counts import (
    DeliveryCount,
    DeliveryTotal,
    DeliveryWorkspaceQuarter,
    FunnelPerson,
)
from app.db.models.instagram import AccountStatus, InstagramAccount
from app.db.models.ledger import (
    Comment,
    CommentOutcome,
    CommentVerdictCount,
    CommentVerdictTotal,
    MissReason,
    SeenVia,
)
from app.db.models.messaging import MessagingEvent, MessagingEventKind, MessagingMissReason
from app.db.models.operations import (
    EventLevel,
    IdempotencyHit,
    IdempotencyHitKind,
    IdempotencyKey,
    IdempotencyStatus,
    OperationalEvent,
    UsageCounter,
)
from app.db.models.privacy import DataDeletionRequest
from app.db.models.reports import CampaignReportLink
from app.db.models.webhooks import WebhookEvent, WebhookStatus
from app.db.models.workspaces import Role, User, Workspace, WorkspaceInvite, WorkspaceMember

__all__ = [
    "AccountStatus",
    "AttemptClass",
    "Base",
    "Campaign",
    "CampaignRecipient",
    "CampaignReportLink",
    "CampaignScope",
    "CampaignStatus",
    "CampaignTrigger",
    "Comment",
    "CommentOutcome",
    "CommentVerdictCount",
    "CommentVerdictTotal",
    "DataDeletionRequest",
    "DeliveryAttempt",
    "DeliveryCount",
    "DeliveryTotal",
    "DeliveryWorkspaceQuarter",
    "DmLog",
    "EventLevel",
    "FunnelPerson",
    "IdempotencyHit",
    "IdempotencyHitKind",
    "IdempotencyKey",
    "IdempotencyStatus",
    "InstagramAccount",
    "Leg",
    "LegState",
    "LinkClick",
    "LinkClickButtonPerson",
    "LinkClickDay",
    "LinkClickDayPerson",
    "LinkClickHour",
    "LinkClickPerson",
    "LinkClickQuarter",
    "LinkVisit",
    "MatchMode",
    "MessageKind",
    "MessagingEvent",
    "MessagingEventKind",
    "MessagingMissReason",
    "MissReason",
    "OperationalEvent",
    "PersonClaim",
    "PostbackDelivery",
    "Role",
    "SeenVia",
    "TriggerKind",
    "UsageCounter",
    "User",
    "WebhookEvent",
    "WebhookStatus",
    "Workspace",
    "WorkspaceInvite",
    "WorkspaceMember",
]
