"""From what arrived to the likely reason comments do not: pure, so each case is plain to test.

Meta sends no webhook for a comment when the app is in Development mode and the commenter
has no role on the app, when the account did not grant the comments permission, when the
`comments` field is not subscribed, or when the app lacks Advanced Access for comments. The
reconciler still finds those comments by polling, minutes later; so when most of a week's
comments arrive only that way, one of these is the cause, and the numbers say which.
"""

from __future__ import annotations

from app.setup_doctor.report import Check, Status
from app.setup_doctor.traffic import Traffic

TITLE = "Comments arrive by webhook"
# Below this many recovered comments a week, a few lost webhooks are Meta's ordinary losses.
MOSTLY_RECOVERED_MIN = 2


def diagnose(
    traffic: Traffic, *, comments_subscribed: bool | None, comments_permission: bool | None
) -> Check:
    hooked, recovered = traffic.webhook_comments, traffic.recovered_comments
    total = hooked + recovered
    if total == 0:
        return Check(
            "delivery",
            TITLE,
            Status.INFO,
            "No comments in the last 7 days on the posts your campaigns watch, so there is "
            "nothing to compare yet. Comment from a second account to test.",
        )
    mostly_recovered = recovered > hooked and (recovered >= MOSTLY_RECOVERED_MIN or hooked == 0)
    if not mostly_recovered:
        lost = (
            f" {recovered} were found only by the reconciler (Meta drops a few)."
            if recovered
            else ""
        )
        return Check(
            "delivery",
            TITLE,
            Status.OK,
            f"{hooked} of the last 7 days' {total} comments arrived by webhook within "
            f"seconds.{lost}",
        )
    numbers = (
        f"In the last 7 days {recovered} of {total} comments reached OnceReply only through the "
        "reconciler, minutes late, because Meta sent no webhook for them."
    )
    if comments_subscribed is False:
        return Check(
            "delivery",
            TITLE,
            Status.FAIL,
            f"{numbers} The likely cause: the account is not subscribed to the comments field.",
            "Press Re-subscribe below.",
        )
    if comments_permission is False:
        return Check(
            "delivery",
            TITLE,
            Status.FAIL,
            f"{numbers} The likely cause: the comments permission was not granted when the "
            "account was connected.",
            "Reconnect the account on the Accounts page and leave every permission ticked.",
        )
    if traffic.webhook_people and traffic.people_only_recovered:
        return Check(
            "delivery",
            TITLE,
            Status.FAIL,
            f"{numbers} Webhooks came only for {traffic.webhook_people} "
            f"{'person' if traffic.webhook_people == 1 else 'people'}, never for the "
            f"{traffic.people_only_recovered} others. That is what Meta does while the app is in "
            "Development mode: it sends webhooks only for people with a role on the app.",
            "Switch the app to Live in Meta's App Dashboard once App Review has granted Advanced "
            "Access (docs/going-live.md, step 7). To test before that, add the commenters as "
            "Instagram testers (step 6).",
        )
    return Check(
        "delivery",
        TITLE,
        Status.FAIL,
        f"{numbers} Likely causes, most common first: the app is in Development mode and the "
        "commenters have no role on it; the app has no Advanced Access for comments; Meta's "
        "webhook settings do not have the callback URL or the comments field ticked.",
        "Check the app is Live with Advanced Access for instagram_business_manage_comments, "
        "and that Meta's Webhooks page lists this server's callback URL with comments ticked "
        "(docs/going-live.md, steps 4 and 7).",
    )
