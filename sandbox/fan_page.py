"""The pages a person uses to play a fan: pick an identity, open a post, comment, reply,
follow, message the account, reply to its live stories, mention it in a story of their own,
read the inbox (button templates rendered) and tap buttons; and, on the home page, to post a
story as a creator.

Plain HTML forms that POST and redirect back (303), so it works without JavaScript and a
browser test can drive it. The fan is chosen with the ``fan`` query parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from litestar import Request, get, post
from litestar.datastructures import FormMultiDict
from litestar.response import Redirect, Template

from sandbox import fan_actions
from sandbox.fan_actions import ActionError, find_account, find_fan
from sandbox.models import Account, Comment, Fan, Media, Message
from sandbox.runtime import Sandbox, sandbox_of


def _ago(sandbox: Sandbox, then: float) -> str:
    seconds = max(0, int(sandbox.clock.now() - then))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return "now"


def _url(path: str, **params: str | None) -> str:
    kept = {k: v for k, v in params.items() if v}
    return f"{path}?{urlencode(kept)}" if kept else path


def _back(path: str, error: ActionError | None = None, **params: str | None) -> Redirect:
    return Redirect(_url(path, error=error.message if error else None, **params), status_code=303)


def _post_view(sandbox: Sandbox, media: Media) -> dict[str, Any]:
    return {
        "id": media.id,
        "caption": media.caption,
        "kind": "Reel" if media.media_product_type == "REELS" else "Post",
        "ago": _ago(sandbox, media.created_at),
        "comments": media.comments_count,
        "likes": media.like_count,
    }


def _story_view(sandbox: Sandbox, story: Media) -> dict[str, Any]:
    return {"id": story.id, "caption": story.caption, "ago": _ago(sandbox, story.created_at)}


def _comment_view(sandbox: Sandbox, comment: Comment) -> dict[str, Any]:
    world = sandbox.world
    author = comment.fan or world.accounts[comment.account_id].username
    return {
        "id": comment.id,
        "author": author,
        "by_account": comment.fan is None,
        "text": comment.text,
        "ago": _ago(sandbox, comment.created_at),
        "hidden": comment.hidden,
        "replies": [
            _comment_view(sandbox, world.comments[r])
            for r in comment.reply_ids
            if not world.comments[r].deleted
        ],
    }


def _message_view(sandbox: Sandbox, message: Message) -> dict[str, Any]:
    payload = (message.attachment or {}).get("payload")
    template = payload if isinstance(payload, dict) and "template_type" in payload else None
    return {
        "mid": message.mid,
        "mine": not message.from_business,
        "text": message.text,
        "template": template,
        "media_url": payload.get("url") if isinstance(payload, dict) else None,
        "image": (message.attachment or {}).get("type") == "image",
        "quick_replies": message.quick_replies or [],
        "private_reply": message.comment_id is not None,
        "story_reply": message.reply_to_story is not None,
        "story_mention": message.kind == "story_mention",
        "ago": _ago(sandbox, message.created_at),
    }


def _preview(message: Message) -> str:
    payload = (message.attachment or {}).get("payload")
    template_text = payload.get("text") if isinstance(payload, dict) else None
    return message.text or template_text or "[attachment]"


def _accounts_view(sandbox: Sandbox, fan: Fan | None) -> list[dict[str, Any]]:
    world = sandbox.world
    now = sandbox.clock.now()
    return [
        {
            "id": a.user_id,
            "username": a.username,
            "name": a.name,
            "bio": a.biography,
            "followers": a.followers_count,
            "following": fan is not None and a.user_id in fan.follows,
            "posts": [_post_view(sandbox, world.media[m]) for m in reversed(a.media_ids)],
            "stories": [
                _story_view(sandbox, world.media[m])
                for m in reversed(a.story_ids)
                if world.media[m].live_at(now)
            ],
        }
        for a in world.accounts.values()
    ]


def _fan_or_none(sandbox: Sandbox, ref: str | None) -> Fan | None:
    return sandbox.world.fan(ref) if ref else None


@get("/", name="home", sync_to_thread=False, include_in_schema=False)
def home(request: Request[Any, Any, Any]) -> Template:
    sandbox = sandbox_of(request.app.state)
    return Template(
        "home.html",
        context={
            "accounts": _accounts_view(sandbox, None),
            "fans": list(sandbox.world.fans.values()),
            "public_url": sandbox.config.public_url,
        },
    )


@get("/fan", name="fan_home", sync_to_thread=False, include_in_schema=False)
def fan_home(
    request: Request[Any, Any, Any],
    fan: str | None = None,
    error: str | None = None,
    done: str | None = None,
) -> Template:
    sandbox = sandbox_of(request.app.state)
    person = _fan_or_none(sandbox, fan)
    if person is None:
        return Template("fan_pick.html", context={"fans": list(sandbox.world.fans.values())})
    return Template(
        "fan_home.html",
        context={
            "fan": person,
            "accounts": _accounts_view(sandbox, person),
            "inbox_count": len(person.inbox),
            "error": error,
            "done": done,
        },
    )


@get("/fan/post/{media_id:str}", name="fan_post", sync_to_thread=False, include_in_schema=False)
def fan_post(
    request: Request[Any, Any, Any], media_id: str, fan: str | None = None, error: str | None = None
) -> Template | Redirect:
    sandbox = sandbox_of(request.app.state)
    person = _fan_or_none(sandbox, fan)
    media = sandbox.world.media.get(media_id)
    if person is None or media is None:
        return _back("/fan", fan=fan)
    world = sandbox.world
    owner: Account = world.accounts[media.owner_id]
    comments = [
        _comment_view(sandbox, world.comments[c])
        for c in reversed(media.comment_ids)
        if not world.comments[c].deleted
    ]
    return Template(
        "post.html",
        context={
            "fan": person,
            "post": _post_view(sandbox, media),
            "owner": owner,
            "following": owner.user_id in person.follows,
            "comments": comments,
            "error": error,
        },
    )


@post("/fan/comment", name="fan_comment", include_in_schema=False)
async def fan_comment(request: Request[Any, Any, Any]) -> Redirect:
    sandbox = sandbox_of(request.app.state)
    form = await request.form()
    fan, media_id = str(form.get("fan", "")), str(form.get("media_id", ""))
    try:
        fan_actions.comment(
            sandbox,
            find_fan(sandbox, fan),
            media_id,
            str(form.get("text", "")),
            str(form.get("parent_id", "")) or None,
        )
    except ActionError as error:
        return _back(f"/fan/post/{media_id}", error, fan=fan)
    return _back(f"/fan/post/{media_id}", fan=fan)


@post("/fan/delete", name="fan_delete", include_in_schema=False)
async def fan_delete(request: Request[Any, Any, Any]) -> Redirect:
    sandbox = sandbox_of(request.app.state)
    form = await request.form()
    fan, comment_id = str(form.get("fan", "")), str(form.get("comment_id", ""))
    found = sandbox.world.comments.get(comment_id)
    person = _fan_or_none(sandbox, fan)
    if found is None or person is None or found.fan != person.username:
        return _back("/fan", ActionError("you can only delete your own comments"), fan=fan)
    fan_actions.delete_comment(sandbox, comment_id)
    return _back(f"/fan/post/{found.media_id}", fan=fan)


@post("/fan/follow", name="fan_follow", include_in_schema=False)
async def fan_follow(request: Request[Any, Any, Any]) -> Redirect:
    sandbox = sandbox_of(request.app.state)
    form = await request.form()
    fan = str(form.get("fan", ""))
    back = str(form.get("next", "")) or _url("/fan", fan=fan)
    if not back.startswith("/"):
        back = "/fan"
    try:
        person, account = (
            find_fan(sandbox, fan),
            find_account(sandbox, str(form.get("account", ""))),
        )
    except ActionError as error:
        return _back("/fan", error, fan=fan)
    if form.get("action") == "unfollow":
        fan_actions.unfollow(sandbox, person, account)
    else:
        fan_actions.follow(sandbox, person, account)
    return Redirect(back, status_code=303)


@get("/fan/inbox", name="fan_inbox", sync_to_thread=False, include_in_schema=False)
def fan_inbox(
    request: Request[Any, Any, Any],
    fan: str | None = None,
    account: str | None = None,
    error: str | None = None,
) -> Template | Redirect:
    sandbox = sandbox_of(request.app.state)
    person = _fan_or_none(sandbox, fan)
    if person is None:
        return _back("/fan")
    world = sandbox.world
    threads = []
    for candidate in world.accounts.values():
        conversation = world.conversations.get((candidate.user_id, person.username))
        last = conversation.messages[-1] if conversation and conversation.messages else None
        threads.append(
            {
                "account": candidate,
                "last": _preview(last) if last else None,
                "ago": _ago(sandbox, last.created_at) if last else "",
            }
        )
    chosen = world.account(account) if account else None
    messages: list[dict[str, Any]] = []
    if chosen is not None:
        conversation = world.conversations.get((chosen.user_id, person.username))
        if conversation is not None:
            messages = [_message_view(sandbox, m) for m in conversation.messages]
            # Opening a thread is what makes Instagram send messaging_seen.
            fan_actions.mark_seen(sandbox, person, chosen)
    return Template(
        "inbox.html",
        context={
            "fan": person,
            "threads": threads,
            "chosen": chosen,
            "messages": messages,
            "error": error,
        },
    )


InboxAction = Callable[[Sandbox, Fan, Account, FormMultiDict], object]


async def _in_inbox(request: Request[Any, Any, Any], act: InboxAction) -> Redirect:
    """Run a fan's action on a thread of their inbox and go back to it (with the error)."""
    sandbox = sandbox_of(request.app.state)
    form = await request.form()
    fan, account = str(form.get("fan", "")), str(form.get("account", ""))
    try:
        act(sandbox, find_fan(sandbox, fan), find_account(sandbox, account), form)
    except ActionError as error:
        return _back("/fan/inbox", error, fan=fan, account=account)
    return _back("/fan/inbox", fan=fan, account=account)


@post("/fan/dm", name="fan_dm", include_in_schema=False)
async def fan_dm(request: Request[Any, Any, Any]) -> Redirect:
    return await _in_inbox(
        request,
        lambda sandbox, fan, account, form: fan_actions.direct_message(
            sandbox, fan, account, form.get("text", "")
        ),
    )


@post("/fan/tap", name="fan_tap", include_in_schema=False)
async def fan_tap(request: Request[Any, Any, Any]) -> Redirect:
    return await _in_inbox(
        request,
        lambda sandbox, fan, account, form: fan_actions.tap(
            sandbox,
            fan,
            account,
            mid=str(form.get("mid", "")) or None,
            payload=str(form.get("payload", "")) or None,
        ),
    )


async def _on_feed(request: Request[Any, Any, Any], act: InboxAction) -> Redirect:
    """Run a fan's action from the feed (a story reply, a mention) and go back to the feed."""
    sandbox = sandbox_of(request.app.state)
    form = await request.form()
    fan, account = str(form.get("fan", "")), str(form.get("account", ""))
    try:
        act(sandbox, find_fan(sandbox, fan), find_account(sandbox, account), form)
    except ActionError as error:
        return _back("/fan", error, fan=fan)
    return _back("/fan", fan=fan, done=str(form.get("done", "")) or None)


@post("/fan/story_reply", name="fan_story_reply", include_in_schema=False)
async def fan_story_reply(request: Request[Any, Any, Any]) -> Redirect:
    return await _on_feed(
        request,
        lambda sandbox, fan, account, form: fan_actions.story_reply(
            sandbox, fan, account, str(form.get("story_id", "")), form.get("text", "")
        ),
    )


@post("/fan/story_mention", name="fan_story_mention", include_in_schema=False)
async def fan_story_mention(request: Request[Any, Any, Any]) -> Redirect:
    return await _on_feed(
        request,
        lambda sandbox, fan, account, form: fan_actions.story_mention(sandbox, fan, account),
    )


@post("/creator/story", name="creator_story", include_in_schema=False)
async def creator_story(request: Request[Any, Any, Any]) -> Redirect:
    """A creator posts a story by hand (`make dev`): live for 24 hours, listed by `/stories`."""
    sandbox = sandbox_of(request.app.state)
    form = await request.form()
    try:
        account = find_account(sandbox, str(form.get("account", "")))
    except ActionError as error:
        return _back("/", error)
    sandbox.world.add_media(
        account,
        caption=str(form.get("caption", ""))[:2200],
        media_type="IMAGE",
        media_product_type="STORY",
        created_at=sandbox.clock.now(),
    )
    return _back("/")
