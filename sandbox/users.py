"""``GET /{igsid}``: a fan's profile and the follow-gate check (`is_user_follow_business`).

Meta answers only after the person has consented by messaging the account or tapping a
postback; before that it is code 230. ``is_user_follow_business`` turns true only
``follow_lag_seconds`` after the follow, to model Instagram's slow follow propagation.
"""

from __future__ import annotations

from typing import Any

from litestar import Response

from sandbox.call import GraphCall
from sandbox.errors import GraphError, unsupported
from sandbox.faults import FaultTarget
from sandbox.fields import parse_fields
from sandbox.models import Account, Fan
from sandbox.outcomes import Reply, perform

PROFILE_DEFAULT = "name,username"


def consent_required() -> GraphError:
    return GraphError("User consent is required to access user profile", 230)


def follows(call: GraphCall, fan: Fan, account: Account) -> bool:
    since = fan.follows.get(account.user_id)
    lag = call.sandbox.settings.follow_lag_seconds
    return since is not None and call.now() - since >= lag


async def user_profile(call: GraphCall, igsid: str) -> Response[bytes]:
    account = call.account()
    fan, account_id = call.sandbox.world.igsids[igsid]
    if account_id != account.user_id or call.method != "GET":
        raise unsupported(call.method, igsid)

    def operation() -> Reply:
        conversation = call.sandbox.world.conversations.get((account.user_id, fan.username))
        if conversation is None or not conversation.consented:
            raise consent_required()
        values: dict[str, Any] = {
            "name": fan.name,
            "username": fan.username,
            "profile_pic": f"https://scontent.cdninstagram.com/v/sandbox/{fan.username}.jpg",
            "follower_count": fan.follower_count,
            "is_verified_user": fan.is_verified,
            "is_user_follow_business": follows(call, fan, account),
            "is_business_follow_user": False,
            "id": igsid,
        }
        fields = parse_fields(call.param("fields"), PROFILE_DEFAULT)
        body = {name: values[name] for name in fields if name in values}
        body["id"] = igsid
        return Reply(body)

    return await perform(
        call.sandbox,
        call.request,
        endpoint="user_profile",
        target=FaultTarget(account.user_id, None, fan.username),
        operation=operation,
    )
