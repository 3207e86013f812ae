"""Campaign pages: the list, the editor with its live DM preview, status actions, "Try a comment".

The editor is one form that also works without JavaScript. With htmx it posts in place: a
form with errors comes back as the form partial (HTTP 422, errors next to the fields), a save
answers with a redirect. Every state-changing form carries an idempotency key (see
`app.web.idempotency`), so a double-click saves once and both clicks land on the same page.
Small partial endpoints serve the editor while someone types: the DM preview, the keyword
chips, and the post picker (thumbnails straight from the Graph API; image URLs expire, so
they are never stored).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from litestar import Controller, Response, get, post
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, FromQuery
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Redirect, Template
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.cards import AccountCard, get_account, list_accounts
from app.accounts.connect import account_token
from app.auth.current import Viewer
from app.campaigns.matching import CampaignRule, CommentFacts, choose_campaign
from app.campaigns.message_format import build_message, buttons_of, render
from app.campaigns.service import (
    EDITABLE,
    Problem,
    Refusal,
    activate_campaign,
    archive_campaign,
    create_campaign,
    duplicate_campaign,
    explain_update,
    get_campaign,
    list_campaigns,
    pause_campaign,
    update_campaign,
)
from app.campaigns.validation import (
    CampaignInput,
    activation_problems,
    check_button_message,
    check_campaign,
    check_dm_text,
    check_follow_up_text,
    check_keywords,
    input_from_values,
    keyword_chips,
    link_problem,
    parse_campaign_form,
)
from app.db.models import AccountStatus, Campaign, CampaignStatus
from app.delivery.content import compose
from app.delivery.content.compose import CampaignTexts, Content
from app.delivery.content.follow_ups import render_follow_up
from app.instagram.graph import GraphError
from app.operations.idempotency import Finished, Refused
from app.resources import Resources
from app.web.guards import editors_only
from app.web.htmx import wants_partial
from app.web.idempotency import idempotent, redirect_to

_NO_STORE = {"Cache-Control": "no-store"}
PREVIEW_USERNAME = "jane.doe"
MEDIA_PAGE_SIZE = 12
_NOTICES = {
    "saved": "Saved.",
    "created": "Campaign created.",
    "copied": "This is a copy, saved as a draft. Rename it and pick its post.",
}


def _not_found() -> NotFoundException:
    return NotFoundException("No such campaign in this workspace.")


async def _usable_accounts(session: AsyncSession, workspace_id: int) -> list[AccountCard]:
    return [
        account
        for account in await list_accounts(session, workspace_id)
        if account.status is not AccountStatus.DISCONNECTED
    ]


async def _editor(
    request: HTMXRequest,
    session: AsyncSession,
    viewer: NamedDependency[Viewer],
    *,
    campaign: Campaign | None,
    form: CampaignInput,
    errors: Mapping[str, str],
    status_code: int = 200,
    notice: FromQuery[str | None] = None,
) -> Template:
    """The editor page, or only its form when htmx asked (errors swap in place)."""
    accounts = await list_accounts(session, viewer.workspace_id)
    context = {
        "campaign": campaign,
        "form": form,
        "errors": errors,
        "accounts": [a for a in accounts if a.status is not AccountStatus.DISCONNECTED] or accounts,
        "notice": notice,
        "can_change": viewer.can_change,
        "preview": _preview_context(form),
    }
    template = "campaigns/_form.html" if wants_partial(request) else "campaigns/edit.html"
    return Template(template, context=context, status_code=status_code, headers=_NO_STORE)


def _preview_context(form: CampaignInput) -> dict[str, Any]:
    buttons = buttons_of([{"title": b.title, "url": b.url} for b in form.filled_buttons])
    message = build_message(form.dm_text, buttons, username=PREVIEW_USERNAME)
    attachment = message.body.get("attachment", {})
    payload = attachment.get("payload", {}) if isinstance(attachment, dict) else {}
    text = message.text if form.dm_text.strip() else ""
    # Count what was typed (placeholders filled in), not the copy the sender would cut to fit.
    typed = render(
        form.dm_text.replace("{link}", "") if buttons else form.dm_text,
        username=PREVIEW_USERNAME,
        link=None,
    ).strip()
    steps = _two_step_preview(form)
    return {
        "empty": not form.dm_text.strip(),
        "kind": message.kind,
        "text": text,
        "buttons": [
            # What was typed is shown, but only a link the campaign could be saved with is
            # clickable: the preview must not open javascript: or any other scheme.
            {**button, "href": None if link_problem(str(button.get("url", ""))) else button["url"]}
            for button in (payload.get("buttons", []) if message.kind == "template" else [])
        ],
        "bytes": len(typed.encode("utf-8")),
        "chars": len(typed),
        "error": check_dm_text(form),
        "username": PREVIEW_USERNAME,
        "steps": steps,
        "reveal_label": (
            ("After the tap, once they follow you" if form.follow_gate_enabled else "After the tap")
            + ": the link"
            if steps
            else None
        ),
        "follow_up": _follow_up_preview(form),
    }


def _two_step_preview(form: CampaignInput) -> list[dict[str, Any]]:
    """The bubbles before the link: the opening DM and/or the follow prompt, each with its
    postback button (order: opening DM → follow gate → link)."""
    texts = CampaignTexts(
        campaign_id=0,
        dm_text=form.dm_text,
        buttons=[],
        opening_dm_text=form.opening_dm_text,
        opening_dm_button_title=form.opening_dm_button_title,
        follow_gate=form.follow_gate_enabled,
        follow_prompt_text=form.follow_prompt_text,
        follow_prompt_button_title=form.follow_prompt_button_title,
    )
    steps: list[dict[str, Any]] = []
    if form.opening_dm_enabled:
        content = compose.opening_dm(texts, username=PREVIEW_USERNAME)
        steps.append(
            _step(
                "opening",
                "The private reply to the comment",
                content,
                check_button_message(form.opening_dm_text),
            )
        )
    if form.follow_gate_enabled:
        when = "After the tap, if" if steps else "The private reply to the comment, if"
        content = compose.follow_prompt(texts, username=PREVIEW_USERNAME)
        steps.append(
            _step(
                "prompt",
                f"{when} @{PREVIEW_USERNAME} does not follow you yet",
                content,
                check_button_message(form.follow_prompt_text),
            )
        )
    return steps


def _step(name: str, label: str, content: Content, error: str | None) -> dict[str, Any]:
    attachment = content.message.body["attachment"]
    [button] = attachment["payload"]["buttons"]
    return {
        "name": name,
        "label": label,
        "text": content.message.text,
        "button": button["title"],
        "chars": len(content.message.text),
        "error": error,
    }


def _follow_up_preview(form: CampaignInput) -> dict[str, Any] | None:
    if not form.follow_up_enabled:
        return None
    try:
        delay = int(form.follow_up_delay_minutes)
    except ValueError:
        delay = 0
    buttons = [{"title": b.title, "url": b.url} for b in form.filled_buttons]
    return {
        "text": render_follow_up(form.follow_up_text, username=PREVIEW_USERNAME, buttons=buttons),
        "delay": delay,
        "error": check_follow_up_text(form),
    }


def _back(form: Mapping[str, Any], campaign_id: int) -> str:
    return "/campaigns" if form.get("back") == "list" else f"/campaigns/{campaign_id}"


class CampaignsController(Controller):
    path = "/campaigns"

    @get("/", name="campaigns")
    async def index(
        self,
        viewer: NamedDependency[Viewer],
        db_session: NamedDependency[AsyncSession],
        archived: FromQuery[bool] = False,
    ) -> Template:
        campaigns = await list_campaigns(db_session, viewer.workspace_id, archived=archived)
        accounts = await _usable_accounts(db_session, viewer.workspace_id)
        return Template(
            "campaigns/index.html",
            context={
                "campaigns": campaigns,
                "archived": archived,
                "has_accounts": bool(accounts),
                "can_change": viewer.can_change,
                "today": datetime.now(UTC).date().isoformat(),
            },
            headers=_NO_STORE,
        )

    @get("/new", name="campaign_new", guards=[editors_only])
    async def new(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        db_session: NamedDependency[AsyncSession],
        account_id: FromQuery[int | None] = None,
    ) -> Template | Redirect:
        accounts = await _usable_accounts(db_session, viewer.workspace_id)
        if not accounts:
            return Redirect("/accounts?need=1", status_code=303)
        chosen = next((a for a in accounts if a.id == account_id), accounts[0])
        form = CampaignInput(account_id=str(chosen.id))
        return await _editor(request, db_session, viewer, campaign=None, form=form, errors={})

    @post("/", name="campaign_create", status_code=200, guards=[editors_only])
    async def create(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        db_session: NamedDependency[AsyncSession],
    ) -> Response[Any]:
        raw = await request.form()
        form = parse_campaign_form(raw)
        activate = raw.get("activate") == "1"
        errors = check_campaign(form, require_complete=activate)
        if errors:
            return await _editor(
                request,
                db_session,
                viewer,
                campaign=None,
                form=form,
                errors=errors,
                status_code=422,
            )

        async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
            campaign_id = await create_campaign(
                session,
                workspace_id=viewer.workspace_id,
                user_id=viewer.user_id,
                values=form.column_values(),
                activate=activate,
            )
            if campaign_id is None:
                return Refused(
                    await _editor(
                        request,
                        db_session,
                        viewer,
                        campaign=None,
                        form=form,
                        errors={"account_id": "Choose one of this workspace's connected accounts."},
                        status_code=422,
                    )
                )
            return redirect_to(f"/campaigns/{campaign_id}?notice=created")

        return await idempotent(request, resources, viewer, scope="campaign.create", action=action)

    @get("/{campaign_id:int}", name="campaign")
    async def edit(
        self,
        *,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        db_session: NamedDependency[AsyncSession],
        campaign_id: FromPath[int],
        notice: FromQuery[str | None] = None,
        check: FromQuery[bool] = False,
    ) -> Template:
        campaign = await get_campaign(db_session, viewer.workspace_id, campaign_id)
        if campaign is None:
            raise _not_found()
        form = input_from_values({name: getattr(campaign, name) for name in EDITABLE})
        errors = activation_problems(form) if check else {}
        message = _NOTICES.get(notice or "")
        if check and errors:
            message = "Before it can go live, this campaign needs the fields marked below."
        return await _editor(
            request,
            db_session,
            viewer,
            campaign=campaign,
            form=form,
            errors=errors,
            notice=message,
        )

    @post("/{campaign_id:int}", name="campaign_save", status_code=200, guards=[editors_only])
    async def save(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        db_session: NamedDependency[AsyncSession],
        campaign_id: FromPath[int],
    ) -> Response[Any]:
        campaign = await get_campaign(db_session, viewer.workspace_id, campaign_id)
        if campaign is None:
            raise _not_found()
        raw = await request.form()
        form = parse_campaign_form(raw)
        try:
            seen_version = int(str(raw.get("version") or ""))
        except ValueError:
            seen_version = -1
        live = campaign.status is CampaignStatus.ACTIVE
        errors = check_campaign(form, require_complete=live)
        if errors:
            return await _editor(
                request,
                db_session,
                viewer,
                campaign=campaign,
                form=form,
                errors=errors,
                status_code=422,
                notice="This campaign is live, so it must stay complete; pause it to save a draft."
                if live and activation_problems(form)
                else None,
            )

        async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
            version = await update_campaign(
                session,
                workspace_id=viewer.workspace_id,
                campaign_id=campaign_id,
                seen_version=seen_version,
                values=form.column_values(),
                complete=not activation_problems(form),
            )
            if version is not None:
                return redirect_to(f"/campaigns/{campaign_id}?notice=saved")
            refusal = await explain_update(
                session,
                workspace_id=viewer.workspace_id,
                campaign_id=campaign_id,
                seen_version=seen_version,
                account_id=int(form.account_id),
            )
            return Refused(
                await self._refused_save(
                    request=request,
                    session=db_session,
                    viewer=viewer,
                    campaign=campaign,
                    form=form,
                    refusal=refusal,
                )
            )

        return await idempotent(request, resources, viewer, scope="campaign.save", action=action)

    async def _refused_save(
        self,
        *,
        request: HTMXRequest,
        session: AsyncSession,
        viewer: NamedDependency[Viewer],
        campaign: Campaign,
        form: CampaignInput,
        refusal: Refusal,
    ) -> Response[Any]:
        if refusal.problem is Problem.NOT_FOUND:
            raise _not_found()
        errors: dict[str, str] = {}
        status, notice = 409, None
        if refusal.problem is Problem.ARCHIVED:
            notice = "This campaign is archived; archived campaigns cannot be edited."
        elif refusal.problem is Problem.CHANGED:
            notice = (
                "Someone saved this campaign after you opened it. Your changes were not saved: "
                "reload the page to see the latest version."
            )
        elif refusal.problem is Problem.ACCOUNT:
            status, errors = 422, {"account_id": "Choose one of this workspace's accounts."}
        else:
            status, errors = 422, dict(activation_problems(form))
            notice = "This campaign is live, so it must stay complete; pause it to save a draft."
        return await _editor(
            request,
            session,
            viewer,
            campaign=campaign,
            form=form,
            errors=errors,
            status_code=status,
            notice=notice,
        )

    @post(
        "/{campaign_id:int}/activate",
        name="campaign_activate",
        status_code=200,
        guards=[editors_only],
    )
    async def activate(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        campaign_id: FromPath[int],
    ) -> Response[Any]:
        return await _change_status(
            request,
            viewer,
            resources,
            campaign_id=campaign_id,
            scope="campaign.activate",
            change=activate_campaign,
        )

    @post("/{campaign_id:int}/pause", name="campaign_pause", status_code=200, guards=[editors_only])
    async def pause(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        campaign_id: FromPath[int],
    ) -> Response[Any]:
        return await _change_status(
            request,
            viewer,
            resources,
            campaign_id=campaign_id,
            scope="campaign.pause",
            change=pause_campaign,
        )

    @post(
        "/{campaign_id:int}/archive",
        name="campaign_archive",
        status_code=200,
        guards=[editors_only],
    )
    async def archive(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        campaign_id: FromPath[int],
    ) -> Response[Any]:
        return await _change_status(
            request,
            viewer,
            resources,
            campaign_id=campaign_id,
            scope="campaign.archive",
            change=archive_campaign,
        )

    @post(
        "/{campaign_id:int}/duplicate",
        name="campaign_duplicate",
        status_code=200,
        guards=[editors_only],
    )
    async def duplicate(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        campaign_id: FromPath[int],
    ) -> Response[Any]:
        async def action(session: AsyncSession) -> Finished:
            copy_id = await duplicate_campaign(
                session,
                workspace_id=viewer.workspace_id,
                campaign_id=campaign_id,
                user_id=viewer.user_id,
            )
            if copy_id is None:
                raise _not_found()
            return redirect_to(f"/campaigns/{copy_id}?notice=copied")

        return await idempotent(
            request, resources, viewer, scope="campaign.duplicate", action=action
        )

    # --- partials that serve the editor while someone types ------------------------------

    @post("/preview", name="campaign_preview", status_code=200)
    async def preview(self, request: HTMXRequest, viewer: NamedDependency[Viewer]) -> Template:
        form = parse_campaign_form(await request.form())
        return Template(
            "campaigns/_preview.html",
            context={"preview": _preview_context(form)},
            headers=_NO_STORE,
        )

    @post("/keywords", name="campaign_keywords", status_code=200)
    async def keywords(self, request: HTMXRequest, viewer: NamedDependency[Viewer]) -> Template:
        raw = await request.form()
        field = "excluded_keywords" if raw.get("field") == "excluded_keywords" else "keywords"
        chips = keyword_chips(raw, field)
        remove = str(raw.get("remove") or "").casefold()
        if remove:
            chips = [chip for chip in chips if chip.casefold() != remove]
        label = "excluded keywords" if field == "excluded_keywords" else "keywords"
        return Template(
            "campaigns/_chips.html",
            context={
                "field": field,
                "chips": chips,
                "error": check_keywords(chips, label),
                "can_change": True,
            },
            headers=_NO_STORE,
        )

    @get("/media", name="campaign_media")
    async def media(
        self,
        *,
        viewer: NamedDependency[Viewer],
        resources: NamedDependency[Resources],
        db_session: NamedDependency[AsyncSession],
        account_id: FromQuery[int | None] = None,
        media_id: FromQuery[str | None] = None,
        media_caption: FromQuery[str | None] = None,
        media_account: FromQuery[int | None] = None,
        after: FromQuery[str | None] = None,
    ) -> Template:
        account = (
            await get_account(db_session, viewer.workspace_id, account_id) if account_id else None
        )
        if media_account is not None and media_account != account_id:
            media_id = media_caption = None  # that post belongs to the previously chosen account
        context: dict[str, Any] = {
            "items": [],
            "after": None,
            "problem": None,
            "selected": media_id or "",
            "selected_caption": media_caption or "",
            "account": account,
            "append": bool(after),
        }
        token = account_token(resources, account) if account else None
        if account is None:
            context["problem"] = "Choose an account to see its posts."
        elif token is None:
            context["problem"] = f"Reconnect @{account.username} to pick one of its posts."
        else:
            try:
                page = await resources.graph.list_media(
                    token, account.ig_user_id, after=after, limit=MEDIA_PAGE_SIZE
                )
            except GraphError:
                context["problem"] = (
                    "Instagram did not send the posts just now. Try again in a moment, "
                    "or choose “any post”."
                )
            else:
                context["items"] = [_media_item(item) for item in page.items]
                context["after"] = page.after
        return Template("campaigns/_media.html", context=context, headers=_NO_STORE)

    # --- "Try a comment" -----------------------------------------------------------------

    @get("/try", name="campaign_try")
    async def try_page(
        self,
        viewer: NamedDependency[Viewer],
        db_session: NamedDependency[AsyncSession],
        account_id: FromQuery[int | None] = None,
    ) -> Template:
        accounts = await _usable_accounts(db_session, viewer.workspace_id)
        chosen = next(
            (a for a in accounts if a.id == account_id), accounts[0] if accounts else None
        )
        return Template(
            "campaigns/try.html",
            context={"accounts": accounts, "chosen": chosen},
            headers=_NO_STORE,
        )

    @post("/try", name="campaign_try_run", status_code=200)
    async def try_comment(
        self,
        request: HTMXRequest,
        viewer: NamedDependency[Viewer],
        db_session: NamedDependency[AsyncSession],
    ) -> Template:
        raw = await request.form()
        text = str(raw.get("comment") or "")
        media_id = str(raw.get("media_id") or "").strip() or None
        try:
            account_id = int(str(raw.get("account_id") or ""))
        except ValueError:
            account_id = 0
        account = await get_account(db_session, viewer.workspace_id, account_id)
        if account is None:
            raise NotFoundException("No such account in this workspace.")
        campaigns = (
            (
                await db_session.execute(
                    select(Campaign)
                    .where(
                        Campaign.workspace_id == viewer.workspace_id,
                        Campaign.account_id == account.id,
                        Campaign.status != CampaignStatus.ARCHIVED,
                    )
                    .order_by(Campaign.id)
                )
            )
            .scalars()
            .all()
        )
        rules = [CampaignRule.from_model(campaign) for campaign in campaigns]
        decision = choose_campaign(rules, CommentFacts(text=text, media_id=media_id))
        context: dict[str, Any] = {
            "decision": decision,
            "comment": text,
            "media_id": media_id,
            "rules": {rule.id: rule for rule in rules},
        }
        headers = {**_NO_STORE, "Vary": "HX-Request"}
        if wants_partial(request):
            return Template("campaigns/_try_result.html", context=context, headers=headers)
        # Without JavaScript the form posts here as a page: answer with the page, the form
        # filled in as it was sent and the result under it.
        accounts = await _usable_accounts(db_session, viewer.workspace_id)
        context |= {"accounts": accounts, "chosen": account}
        return Template("campaigns/try.html", context=context, headers=headers)


StatusChange = Callable[[AsyncSession, int, int], Awaitable[Refusal | None]]


async def _change_status(
    request: HTMXRequest,
    viewer: Viewer,
    resources: Resources,
    *,
    campaign_id: int,
    scope: str,
    change: StatusChange,
) -> Response[Any]:
    """Run one status change (activate, pause, archive) as an idempotent form."""
    form = await request.form()
    back = "/campaigns" if scope == "campaign.archive" else _back(form, campaign_id)

    async def action(session: AsyncSession) -> Finished | Refused[Response[Any]]:
        refusal = await change(session, viewer.workspace_id, campaign_id)
        if refusal is None:
            return redirect_to(back)
        if refusal.problem is Problem.NOT_FOUND:
            raise _not_found()
        if refusal.problem is Problem.INCOMPLETE:
            back_to = f"/campaigns/{campaign_id}?check=1"  # the editor says what is missing
        elif refusal.problem is Problem.ACCOUNT_DISCONNECTED:
            back_to = "/accounts?reconnect=1"
        else:
            back_to = back  # already in that state, or one that does not allow it
        return Refused(Redirect(back_to, status_code=303))

    return await idempotent(request, resources, viewer, scope=scope, action=action)


def _media_item(item: Mapping[str, Any]) -> dict[str, Any]:
    kind = str(item.get("media_type") or "")
    thumbnail = item.get("thumbnail_url") if kind == "VIDEO" else item.get("media_url")
    return {
        "id": str(item.get("id") or ""),
        "caption": str(item.get("caption") or ""),
        "kind": "Reel"
        if item.get("media_product_type") == "REELS"
        else kind.replace("_", " ").title(),
        "thumbnail": thumbnail
        if isinstance(thumbnail, str) and thumbnail.startswith("https://")
        else None,
        "timestamp": str(item.get("timestamp") or "")[:10],
        "comments": item.get("comments_count"),
    }
