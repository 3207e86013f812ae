"""The campaign editor: a new campaign (`/campaigns/new`, saved by `POST /campaigns`) and an
existing one (`/campaigns/{id}`, saved by posting to the same address). Owners and admins
save; members see the editor read-only.

The editor is one form that also works without JavaScript. With htmx it posts in place: a
form with errors comes back as the form partial (HTTP 422, errors next to the fields), a save
answers with a redirect. A save names the version it was opened at, so a save made meanwhile
by someone else is refused (409) instead of overwritten; a live campaign must stay complete.
The DM preview, the keyword chips and the post picker are their own small endpoints
(`preview`, `keywords`, `media`). Without JavaScript the post picker cannot load itself: its
"Show the posts" button (and a page's "More posts") posts the whole form to the same address,
which answers with the editor unsaved, what was typed kept, and the chosen account's posts
listed in it to pick from (`_with_posts`). A campaign with a DM image is saved only once the image's
host says it will do (`app.campaigns.image_check`, a few seconds at most, never blocking the
event loop); its answer is a field error like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from litestar import Response, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Redirect, Template
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.cards import list_accounts, list_usable_accounts
from app.auth.current import Viewer
from app.campaigns.image_check import ImageRefusedError, check_image
from app.campaigns.service import (
    EDITABLE,
    Problem,
    Refusal,
    create_campaign,
    explain_update,
    get_campaign,
    update_campaign,
)
from app.campaigns.validation import (
    CampaignInput,
    activation_problems,
    check_campaign,
    input_from_values,
    parse_campaign_form,
)
from app.db.bounds import BIGINT_MAX, parse_id, parse_int
from app.db.models import AccountStatus, Campaign, CampaignStatus
from app.delivery_log.charts import Timeline, parse_span, timeline
from app.delivery_log.clicks import campaign_clicks
from app.delivery_log.funnel import campaign_funnel
from app.operations.idempotency import Finished, Refused
from app.resources import Resources
from app.web.campaigns.common import NO_STORE, campaign_not_found
from app.web.campaigns.media import posts_context
from app.web.campaigns.preview import preview_context
from app.web.campaigns.report_card import NewReportLink, report_links_context
from app.web.guards import editors_only
from app.web.htmx import wants_partial
from app.web.idempotency import idempotent, redirect_to
from app.web.reads import get_or_head
from app.workspaces.time_zone import zone_or_utc

_NOTICES = {
    "saved": "Saved.",
    "created": "Campaign created.",
    "copied": "This is a copy, saved as a draft. Rename it and pick its post.",
}


@dataclass(frozen=True, slots=True)
class Report:
    """The "Share a report" card's state for one answer (see `campaign_page`)."""

    shared: int | None = None
    new_link: NewReportLink | None = None


# The element the charts' range switch swaps (templates/campaigns/_charts.html).
CHARTS_ID = "campaign-charts"
_MUST_STAY_COMPLETE = "This campaign is live, so it must stay complete; pause it to save a draft."
# The form's buttons that ask for the account's posts instead of a save (no JavaScript).
SHOW_POSTS = "show_posts"
MORE_POSTS = "media_after"
# Meta's paging cursors are a few hundred characters; anything longer is not one.
_MAX_CURSOR = 1024


@get_or_head("/new", name="campaign_new", guards=[editors_only])
async def new(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    db_session: NamedDependency[AsyncSession],
    account_id: FromQuery[int | None] = None,
) -> Template | Redirect:
    accounts = await list_usable_accounts(db_session, viewer.workspace_id)
    if not accounts:
        return Redirect("/accounts?need=1", status_code=303)
    chosen = next((a for a in accounts if a.id == account_id), accounts[0])
    form = CampaignInput(account_id=str(chosen.id))
    return await _editor_page(request, db_session, viewer, campaign=None, form=form)


@post("/", name="campaign_create", status_code=200, guards=[editors_only])
async def create(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    db_session: NamedDependency[AsyncSession],
) -> Response[Any]:
    raw = await request.form()
    form = parse_campaign_form(raw)
    listed = await _with_posts(
        request, db_session, resources, viewer, raw, form=form, campaign=None
    )
    if listed is not None:
        return listed
    activate = raw.get("activate") == "1"
    errors = await _checked(resources, form, require_complete=activate)
    if errors:
        return await _editor_page(
            request, db_session, viewer, campaign=None, form=form, errors=errors, status=422
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
                await _editor_page(
                    request,
                    db_session,
                    viewer,
                    campaign=None,
                    form=form,
                    errors={"account_id": "Choose one of this workspace's connected accounts."},
                    status=422,
                )
            )
        return redirect_to(f"/campaigns/{campaign_id}?notice=created")

    return await idempotent(request, resources, viewer, scope="campaign.create", action=action)


@get_or_head("/{campaign_id:int}", name="campaign")
async def edit(
    *,
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    db_session: NamedDependency[AsyncSession],
    campaign_id: FromPath[int],
    notice: FromQuery[str | None] = None,
    check: FromQuery[bool] = False,
    shared: FromQuery[str | None] = None,
) -> Template:
    if request.htmx and request.htmx.target == CHARTS_ID:
        # The charts' range switch: only the charts, for the range asked.
        campaign = await get_campaign(db_session, viewer.workspace_id, campaign_id)
        if campaign is None:
            raise campaign_not_found()
        chart = await _timeline(request, db_session, viewer, campaign)
        return Template(
            "campaigns/_charts.html",
            context={"campaign": campaign, "timeline": chart},
            headers=NO_STORE,
        )
    return await campaign_page(
        request,
        db_session,
        viewer,
        campaign_id,
        notice=notice,
        check=check,
        shared=parse_int(shared, low=1, high=BIGINT_MAX),
    )


async def campaign_page(
    request: HTMXRequest,
    session: AsyncSession,
    viewer: Viewer,
    campaign_id: int,
    *,
    notice: str | None = None,
    check: bool = False,
    shared: int | None = None,
    new_report: NewReportLink | None = None,
) -> Template:
    """The campaign's page as saved (`shared`: a report link a repeated form made; `new_report`:
    the address of the one just made, shown this once)."""
    campaign = await get_campaign(session, viewer.workspace_id, campaign_id)
    if campaign is None:
        raise campaign_not_found()
    form = input_from_values({name: getattr(campaign, name) for name in EDITABLE})
    errors = activation_problems(form) if check else {}
    message = _NOTICES.get(notice or "")
    if check and errors:
        message = "Before it can go live, this campaign needs the fields marked below."
    return await _editor_page(
        request,
        session,
        viewer,
        campaign=campaign,
        form=form,
        errors=errors,
        notice=message,
        report=Report(shared=shared, new_link=new_report),
    )


@post("/{campaign_id:int}", name="campaign_save", status_code=200, guards=[editors_only])
async def save(
    request: HTMXRequest,
    viewer: NamedDependency[Viewer],
    resources: NamedDependency[Resources],
    db_session: NamedDependency[AsyncSession],
    campaign_id: FromPath[int],
) -> Response[Any]:
    campaign = await get_campaign(db_session, viewer.workspace_id, campaign_id)
    if campaign is None:
        raise campaign_not_found()
    raw = await request.form()
    form = parse_campaign_form(raw)
    # The version the form was opened at goes back into a form shown again, so that a save
    # made meanwhile by someone else is still refused rather than overwritten.
    opened = parse_int(raw.get("version"), low=0, high=BIGINT_MAX)
    listed = await _with_posts(
        request, db_session, resources, viewer, raw, form=form, campaign=campaign, version=opened
    )
    if listed is not None:
        return listed
    seen_version = -1 if opened is None else opened
    live = campaign.status is CampaignStatus.ACTIVE
    errors = await _checked(resources, form, require_complete=live)
    if errors:
        return await _editor_page(
            request,
            db_session,
            viewer,
            campaign=campaign,
            form=form,
            errors=errors,
            status=422,
            notice=_MUST_STAY_COMPLETE if live and activation_problems(form) else None,
            version=opened,
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
            await _refused_save(
                request, db_session, viewer, campaign=campaign, form=form, refusal=refusal
            )
        )

    return await idempotent(request, resources, viewer, scope="campaign.save", action=action)


async def _with_posts(
    request: HTMXRequest,
    session: AsyncSession,
    resources: Resources,
    viewer: Viewer,
    raw: Mapping[str, Any],
    *,
    form: CampaignInput,
    campaign: Campaign | None,
    version: int | None = None,
) -> Template | None:
    """The editor with the chosen account's posts listed in it, unsaved, when the form asked
    for them (`SHOW_POSTS`, or `MORE_POSTS` with the next page's cursor); None otherwise."""
    cursor = raw.get(MORE_POSTS)
    if raw.get(SHOW_POSTS) is None and cursor is None:
        return None
    after = cursor if isinstance(cursor, str) and 0 < len(cursor) <= _MAX_CURSOR else None
    posts = await posts_context(
        session,
        resources,
        viewer.workspace_id,
        parse_id(form.account_id),
        selected=form.media_id,
        selected_caption=form.media_caption,
        after=after,
        plain=True,
    )
    return await _editor_page(
        request, session, viewer, campaign=campaign, form=form, posts=posts, version=version
    )


async def _checked(
    resources: Resources, form: CampaignInput, *, require_complete: bool
) -> dict[str, str]:
    """The form's errors, and whether its image's host says the image will do (asked only of
    a link that passed the other checks: a few seconds at most, without blocking the loop)."""
    errors = check_campaign(form, require_complete=require_complete)
    if form.dm_image_url and "dm_image_url" not in errors:
        settings = resources.settings
        try:
            await check_image(
                form.dm_image_url,
                allow_loopback=settings.image_check_allow_loopback,
                timeout_s=settings.image_check_timeout_s,
            )
        except ImageRefusedError as exc:
            errors["dm_image_url"] = str(exc)
    return errors


async def _editor_page(
    request: HTMXRequest,
    session: AsyncSession,
    viewer: Viewer,
    *,
    campaign: Campaign | None,
    form: CampaignInput,
    errors: Mapping[str, str] | None = None,
    status: int = 200,
    notice: str | None = None,
    report: Report | None = None,
    posts: Mapping[str, Any] | None = None,
    version: int | None = None,
) -> Template:
    """The editor page, or only its form when htmx asked (errors swap in place); `posts`: the
    account's posts listed in the page (`_with_posts`); `version`: the one the form was opened
    at, when it is shown again (the campaign's own otherwise)."""
    accounts = await list_accounts(session, viewer.workspace_id)
    whole_page = campaign is not None and not wants_partial(request)
    clicks = funnel = chart = None
    if campaign is not None and whole_page:
        chart = await _timeline(request, session, viewer, campaign)
        clicks = await campaign_clicks(
            session,
            workspace_id=viewer.workspace_id,
            campaign_id=campaign.id,
            buttons=campaign.buttons,
        )
        funnel = await campaign_funnel(
            session, campaign, zone=zone_or_utc(viewer.time_zone), now=datetime.now(UTC)
        )
    report = report or Report()
    sharing = (
        await report_links_context(
            session, viewer, campaign.id, new_link=report.new_link, shared=report.shared
        )
        if campaign is not None and whole_page
        else {}
    )
    context = {
        **sharing,
        "campaign": campaign,
        "clicks": clicks,
        "funnel": funnel,
        "timeline": chart,
        "form": form,
        "errors": errors or {},
        "accounts": [a for a in accounts if a.status is not AccountStatus.DISCONNECTED] or accounts,
        "notice": notice,
        "can_change": viewer.can_change,
        "preview": preview_context(form),
        "posts": posts,
        "version": version,
    }
    template = "campaigns/_form.html" if wants_partial(request) else "campaigns/edit.html"
    return Template(template, context=context, status_code=status, headers=NO_STORE)


async def _timeline(
    request: HTMXRequest, session: AsyncSession, viewer: Viewer, campaign: Campaign
) -> Timeline:
    return await timeline(
        session,
        workspace_id=viewer.workspace_id,
        campaign_id=campaign.id,
        span=parse_span(request.query_params.get("range")),
        zone=zone_or_utc(viewer.time_zone),
        now=datetime.now(UTC),
    )


async def _refused_save(
    request: HTMXRequest,
    session: AsyncSession,
    viewer: Viewer,
    *,
    campaign: Campaign,
    form: CampaignInput,
    refusal: Refusal,
) -> Response[Any]:
    """The editor again, saying why the save changed nothing."""
    if refusal.problem is Problem.NOT_FOUND:
        raise campaign_not_found()
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
        notice = _MUST_STAY_COMPLETE
    return await _editor_page(
        request,
        session,
        viewer,
        campaign=campaign,
        form=form,
        errors=errors,
        status=status,
        notice=notice,
    )
