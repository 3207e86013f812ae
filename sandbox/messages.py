"""``POST /{ig-user-id}/messages``: private replies and DMs, with Instagram's rules.

- ``recipient.comment_id``: one private reply per comment (100/2534025 after that, unless the
  ``enforce_one_private_reply`` setting is off), only within 7 days of the comment (10/2534022),
  never on a deleted comment (100/33), at most ``private_replies_per_hour`` per account in a
  rolling hour (613/2534040).
- A private reply carries text or a button template: an image (or audio, video, file) or a
  generic template on one is 100/2534015 (invalid message data), and the comment's one
  private reply is not used up by it.
- An image (an image attachment's URL, a generic template's ``image_url``) is fetched first,
  as Meta does; one that cannot be used is 100/2018008 (``image_fetch``).
- ``recipient.id`` (an IGSID): only inside the 24-hour window opened by the fan's own message or
  postback tap (10/2534022, HTTP 403); a private reply does not open it.
- Every send counts against ``sends_per_second`` per account (code 4).
- Scopes: ``instagram_business_manage_messages`` for every send, and a private reply also
  ``instagram_business_manage_comments``; a missing one is code 200, HTTP 403.
"""

from __future__ import annotations

from typing import Any

from litestar import Response

from sandbox.call import GraphCall
from sandbox.errors import GraphError, invalid_param, outside_window, unsupported
from sandbox.faults import FaultTarget
from sandbox.image_fetch import fetch_images, require_fetched
from sandbox.message_checks import INVALID_DATA, MEDIA_TYPES, CheckedMessage, check_message
from sandbox.models import Account, Fan, Message
from sandbox.outcomes import Reply, note_error, perform
from sandbox.tokens import COMMENTS, MESSAGES, require_scope
from sandbox.webhook_events import message_event

DAY = 24 * 3600.0
PRIVATE_REPLY_WINDOW = 7 * DAY
HUMAN_AGENT_WINDOW = 7 * DAY
SENDER_ACTIONS = frozenset({"typing_on", "typing_off", "mark_seen", "react", "unreact"})
MESSAGING_TYPES = frozenset({"RESPONSE", "UPDATE", "MESSAGE_TAG"})


def _invalid_for_private_reply() -> GraphError:
    return GraphError("The comment is invalid for a private reply", 100, subcode=2534025)


def _no_matching_user() -> GraphError:
    return GraphError("(#100) No matching Instagram user", 100, subcode=2534014)


def _logged_body(call: GraphCall) -> Any:
    if isinstance(call.json_body, dict):
        return call.json_body
    fields = call.query | call.form
    fields.pop("access_token", None)
    return fields


def _peek(call: GraphCall) -> tuple[str | None, str | None]:
    """The comment id and fan a request is about, read leniently for logs and fault rules."""
    try:
        recipient = call.structured("recipient")
    except GraphError:
        return None, None
    if not isinstance(recipient, dict):
        return None, None
    world = call.sandbox.world
    comment_id = recipient.get("comment_id")
    if isinstance(comment_id, str):
        comment = world.comments.get(comment_id)
        return comment_id, comment.fan if comment is not None else None
    igsid = recipient.get("id")
    if isinstance(igsid, str) and igsid in world.igsids:
        return None, world.igsids[igsid][0].username
    return None, None


async def send(call: GraphCall, node_id: str) -> Response[bytes]:
    if call.method != "POST":
        raise unsupported(call.method, node_id)
    sandbox = call.sandbox
    comment_id, fan = _peek(call)
    if comment_id is not None:
        sandbox.world.counters_for(comment_id).send_requests += 1
    record = sandbox.journal.start_request(
        endpoint="messages",
        method=call.method,
        path=call.path,
        time=call.now(),
        account_id=None,
        comment_id=comment_id,
        fan=fan,
        body=_logged_body(call),
    )
    try:
        account = call.own_account(node_id)
        require_scope(call.token(), MESSAGES)
        if comment_id is not None:
            # A private reply acts on a comment, so it needs manage_comments as well.
            require_scope(call.token(), COMMENTS)
    except GraphError as error:
        raise note_error(record, error) from None
    record["account_id"] = account.user_id
    fetched = await fetch_images(_message_of(call))
    return await perform(
        sandbox,
        call.request,
        endpoint="messages",
        target=FaultTarget(account.user_id, comment_id, fan),
        operation=lambda: _send(call, account, fetched),
        record=record,
    )


def _message_of(call: GraphCall) -> object:
    try:
        return call.structured("message")
    except GraphError:
        return None


def _fits_private_reply(checked: CheckedMessage) -> bool:
    """No image, audio, video or file and no template but the button template: a comment's
    private reply is text (or a button template, as real tools send)."""
    if checked.attachment is None:
        return True
    kind = checked.attachment.get("type")
    payload = checked.attachment.get("payload")
    if kind in MEDIA_TYPES:
        return False
    return kind != "template" or (
        isinstance(payload, dict) and payload.get("template_type") == "button"
    )


def _send(call: GraphCall, account: Account, fetched: dict[str, bool]) -> Reply:
    sandbox, world, settings = call.sandbox, call.sandbox.world, call.sandbox.settings
    now = call.now()
    recipient = call.structured("recipient")
    if not isinstance(recipient, dict) or not recipient:
        raise invalid_param("The parameter recipient is required")
    comment_id, igsid = recipient.get("comment_id"), recipient.get("id")
    if (comment_id is None) == (igsid is None):
        raise invalid_param("Param recipient must contain exactly one of id or comment_id")
    if not isinstance(comment_id or igsid, str):
        raise invalid_param("Param recipient must hold a string id")

    sender_action = call.param("sender_action")
    if sender_action is not None:
        return _sender_action(call, account, sender_action, igsid)

    human_agent = _human_agent(call)
    media = world.media
    raw_message = call.structured("message")
    checked = check_message(
        raw_message,
        lambda media_id: media_id in media and media[media_id].owner_id == account.user_id,
    )
    if isinstance(comment_id, str) and not _fits_private_reply(checked):
        raise invalid_param(
            "Invalid message data: a private reply to a comment can only carry text or a "
            "button template",
            subcode=INVALID_DATA,
        )
    require_fetched(raw_message, fetched)
    sandbox.limits.take_send(
        account.user_id, now, settings.sends_per_second, settings.private_replies_per_hour
    )

    if isinstance(comment_id, str):
        comment = world.comments.get(comment_id)
        if comment is None or comment.deleted or comment.account_id != account.user_id:
            raise unsupported("POST", comment_id)
        if comment.fan is None:
            raise _invalid_for_private_reply()
        if now - comment.created_at > PRIVATE_REPLY_WINDOW:
            raise outside_window()
        counters = world.counters_for(comment_id)
        if counters.private_replies_delivered and settings.enforce_one_private_reply:
            raise _invalid_for_private_reply()
        sandbox.limits.check_private_reply(account.user_id, now, settings.private_replies_per_hour)
        fan = world.fans[comment.fan]
        kind = "private_reply"
    else:
        fan = _fan_in_window(call, account, str(igsid), HUMAN_AGENT_WINDOW if human_agent else DAY)
        kind = "dm"

    message = Message(
        mid=world.ids.mid(account.user_id),
        account_id=account.user_id,
        fan=fan.username,
        igsid=fan.igsids[account.user_id],
        from_business=True,
        kind="private_reply" if kind == "private_reply" else "dm",
        created_at=now,
        text=checked.text,
        attachment=checked.attachment,
        quick_replies=checked.quick_replies,
        comment_id=comment_id if kind == "private_reply" else None,
    )
    world.record_message(world.conversation(account.user_id, fan), message)
    sandbox.journal.delivered.append(message)
    if message.comment_id is not None:
        world.counters_for(message.comment_id).private_replies_delivered += 1
        sandbox.limits.private_replies.add(account.user_id, now)
    sandbox.emit(message_event(message))
    usage = sandbox.limits.business_usage_header(
        account.user_id, now, settings.private_replies_per_hour
    )
    return Reply(
        {"recipient_id": message.igsid, "message_id": message.mid},
        headers={"X-Business-Use-Case-Usage": usage},
        delivered=True,
    )


def _human_agent(call: GraphCall) -> bool:
    messaging_type = call.param("messaging_type")
    if messaging_type is None:
        return False
    if messaging_type not in MESSAGING_TYPES:
        raise invalid_param("Param messaging_type must be one of {RESPONSE, UPDATE, MESSAGE_TAG}")
    if messaging_type != "MESSAGE_TAG":
        return False
    tag = call.param("tag")
    if tag != "HUMAN_AGENT":
        raise invalid_param(f"Param tag must be HUMAN_AGENT on Instagram, got {tag!r}")
    if not call.sandbox.settings.human_agent_approved:
        raise GraphError(
            "To use 'Human Agent', your use of this endpoint must be reviewed and approved "
            "by Facebook.",
            10,
            http_status=403,
        )
    return True


def _fan_in_window(call: GraphCall, account: Account, igsid: str, window: float) -> Fan:
    world = call.sandbox.world
    entry = world.igsids.get(igsid)
    if entry is None or entry[1] != account.user_id:
        raise _no_matching_user()
    fan = entry[0]
    conversation = world.conversations.get((account.user_id, fan.username))
    last = conversation.last_fan_activity if conversation is not None else None
    if last is None or call.now() - last > window:
        raise outside_window()
    return fan


def _sender_action(call: GraphCall, account: Account, action: str, igsid: object) -> Reply:
    if action not in SENDER_ACTIONS:
        raise invalid_param(f"Param sender_action must be one of {sorted(SENDER_ACTIONS)}")
    if not isinstance(igsid, str):
        raise invalid_param("Param recipient[id] is required for a sender action")
    fan = _fan_in_window(call, account, igsid, DAY)
    if action in ("react", "unreact"):
        payload = call.structured("payload")
        mid = payload.get("message_id") if isinstance(payload, dict) else None
        found = call.sandbox.world.messages.get(mid) if isinstance(mid, str) else None
        if found is None or found.fan != fan.username or found.account_id != account.user_id:
            raise invalid_param("Param payload[message_id] must be a message in this thread")
    return Reply({"recipient_id": igsid})
