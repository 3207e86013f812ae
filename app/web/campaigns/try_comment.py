""" "Try a comment": type a comment (and optionally a post) for one account and see which
campaign would answer it, with the reason for every campaign that would not. Drafts and
paused campaigns are shown too. It asks a question and changes nothing (a POST only because
a comment can be long), so any member may use it.
"""

from __future__ import annotations

from typing import Any

from litestar import post
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.params import FromQuery
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.cards import get_account, list_usable_accounts
from app.auth.current import Viewer
from app.campaigns.matching import CommentFacts, choose_campaign, inside_a_word, inside_an_emoji
from app.campaigns.rules import load_rules_to_try
from app.campaigns.validation import MAX_REPLY
from app.db.bounds import parse_id
from app.db.models import MatchMode
from app.web.campaigns.common import NO_STORE
from app.web.htmx import wants_partial
from app.web.reads import get_or_head


@get_or_head("/try", name="campaign_try")
async def try_page(
    viewer: NamedDependency[Viewer],
    db_session: NamedDependency[AsyncSession],
    account_id: FromQuery[int | None] = None,
) -> Template:
    accounts = await list_usable_accounts(db_session, viewer.workspace_id)
    chosen = next((a for a in accounts if a.id == account_id), accounts[0] if accounts else None)
    return Template(
        "campaigns/try.html",
        context={"accounts": accounts, "chosen": chosen},
        headers=NO_STORE,
    )


@post("/try", name="campaign_try_run", status_code=200)
async def try_comment(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    db_session: NamedDependency[AsyncSession],
) -> Template:
    raw = await request.form()
    text = str(raw.get("comment") or "")[:MAX_REPLY]  # Instagram's comment length
    media_id = str(raw.get("media_id") or "").strip() or None
    account_id = parse_id(raw.get("account_id"))
    account = await get_account(db_session, viewer.workspace_id, account_id) if account_id else None
    if account is None:
        raise NotFoundException("No such account in this workspace.")
    rules = await load_rules_to_try(db_session, viewer.workspace_id, account.id)
    decision = choose_campaign(rules, CommentFacts(text=text, media_id=media_id))
    context: dict[str, Any] = {
        "decision": decision,
        "comment": text,
        "media_id": media_id,
        "rules": {rule.id: rule for rule in rules},
        "inside_word": {
            rule.id: keyword
            for rule in rules
            if rule.match_mode is MatchMode.WHOLE_WORD
            and (keyword := inside_a_word(text, rule.keywords)) is not None
        },
        "inside_emoji": {
            rule.id: found
            for rule in rules
            if (found := inside_an_emoji(text, rule.keywords)) is not None
        },
    }
    headers = {**NO_STORE, "Vary": "HX-Request"}
    if wants_partial(request):
        return Template("campaigns/_try_result.html", context=context, headers=headers)
    # Without JavaScript the form posts here as a page: answer with the page, the form
    # filled in as it was sent and the result under it.
    accounts = await list_usable_accounts(db_session, viewer.workspace_id)
    context |= {"accounts": accounts, "chosen": account}
    return Template("campaigns/try.html", context=context, headers=headers)
