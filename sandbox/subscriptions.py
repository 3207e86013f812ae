"""``/{ig-user-id}/subscribed_apps``: the per-account webhook subscription.

Webhooks for an account flow only for the fields it subscribed (unless the
``require_subscription`` setting is off), and only when the token that subscribed holds the
permission the field needs (``sandbox.permissions``). ``POST /me/subscribed_apps`` fails
with code 100 as field reports show; the explicit account id works.
"""

from __future__ import annotations

from litestar import Response

from sandbox.call import GraphCall, unsupported_method
from sandbox.errors import invalid_param, unsupported
from sandbox.faults import FaultTarget
from sandbox.outcomes import Reply, perform

FIELDS = (
    "comments",
    "live_comments",
    "messages",
    "message_reactions",
    "messaging_postbacks",
    "messaging_referral",
    "messaging_seen",
    "messaging_optins",
    "messaging_handover",
    "standby",
    "message_edit",
)


async def subscribed_apps(call: GraphCall, node_id: str) -> Response[bytes]:
    if node_id == "me" and call.method == "POST":
        call.token()
        raise unsupported_method(call)
    account = call.own_account(node_id)
    sandbox = call.sandbox

    def operation() -> Reply:
        if call.method == "GET":
            data = []
            if account.subscribed_fields:
                data.append(
                    {
                        "subscribed_fields": list(account.subscribed_fields),
                        "id": sandbox.config.instagram_app_id,
                        "name": sandbox.world.app_name,
                    }
                )
            return Reply({"data": data})
        if call.method == "DELETE":
            account.subscribed_fields = []
            account.subscribed_scopes = ()
            return Reply({"success": True})
        if call.method != "POST":
            raise unsupported(call.method, node_id)
        raw = call.param("subscribed_fields")
        if raw is None or not raw.strip():
            raise invalid_param("The parameter subscribed_fields is required")
        fields = [f.strip() for f in raw.strip("[]").replace('"', "").split(",") if f.strip()]
        for field in fields:
            if field not in FIELDS:
                raise invalid_param(
                    f"Param subscribed_fields must be one of {{{', '.join(FIELDS)}}} - "
                    f'got "{field}"'
                )
        account.subscribed_fields = list(dict.fromkeys(fields))
        account.subscribed_scopes = call.token().scopes
        return Reply({"success": True})

    return await perform(
        sandbox,
        call.request,
        endpoint="subscribed_apps",
        target=FaultTarget(account.user_id),
        operation=operation,
    )
