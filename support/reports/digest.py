"""The morning digest: once a day, at REPORTS_DIGEST_HOUR in the desk's time zone, each lead who opted in is
e-mailed (and sent a Slack message when their Slack account is linked) yesterday's figures against the same
weekday a week before and the week before, and the five conversations most worth a look, with links.

The figures are report()'s own values for those days (the page's numbers, never recomputed here). Each lead's
digest of a day is claimed (a DigestSent row, unique per lead and day) before it is sent, so two beats send it
once; a beat that dies between the claim and the send loses that digest: sent at most once, never twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.template.loader import render_to_string
from django.utils import timezone
from slack_sdk.errors import SlackApiError

from support.customers.notify import desk_url
from support.desk import permissions, slack
from support.models import Approval, Conversation, DigestOptIn, DigestSent, Rating, SlackAccount

from .figures import Filters, report
from .formats import shown
from .outcomes import HANDOVER_STOPS
from .rollup import desk_zone

log = logging.getLogger(__name__)

FIGURES = ("new_conversations", "agent_involved", "resolved_by_agent", "resolution_rate", "handed_over",
           "handover_rate", "approvals_asked", "expired", "csat_agent_only", "csat_with_person", "model_cost",
           "cost_per_resolution")
LOOKS = 5


@dataclass(frozen=True)
class Look:
    """A conversation worth a look, and why, in words."""

    public_id: str
    why: str
    url: str


def digest_figures(today: date) -> list[dict]:
    """[{key, label, unit, yesterday, week_ago, week_before}] from report(): yesterday, the same weekday a week
    before it, and the seven days before yesterday."""
    yesterday = today - timedelta(days=1)
    columns = {"yesterday": (yesterday, yesterday), "week_ago": (yesterday - timedelta(days=7),) * 2,
               "week_before": (yesterday - timedelta(days=7), yesterday - timedelta(days=1))}
    reports = {name: report(Filters(start=start, end=end, time_zone=settings.TIME_ZONE))["figures"]
               for name, (start, end) in columns.items()}
    return [{"key": key, "label": reports["yesterday"][key]["label"], "unit": reports["yesterday"][key]["unit"],
             **{name: figures[key]["value"] for name, figures in reports.items()}} for key in FIGURES]


def worth_a_look(today: date, limit: int = LOOKS) -> list[Look]:
    """Yesterday's conversations most worth a look, `limit` at most, taken in turn from three lists: the lowest
    ratings (1 or 2), the longest approval waits (asked to decided, or still waiting), and repeated hand-overs
    (two or more runs that handed over); a conversation on two lists appears once."""
    start, end = Filters(start=today - timedelta(days=1), end=today - timedelta(days=1),
                         time_zone=settings.TIME_ZONE).bounds()
    started = Conversation.objects.filter(created_at__gte=start, created_at__lt=end)
    ratings = [(c, f"rated {score} of 5") for c, score in Rating.objects.filter(
        conversation__in=started, score__lte=2).order_by("score", "conversation_id").values_list(
        "conversation__public_id", "score")[:limit]]
    now = timezone.now()
    approvals = Approval.objects.filter(run__conversation__in=started).values_list(
        "run__conversation__public_id", "requested_at", "decided_at")
    waits = [(c, _waited(asked, decided, now)) for c, asked, decided in sorted(
        approvals, key=lambda a: (a[1] - (a[2] or now), str(a[0])))[:limit]]
    handovers = [(c, f"handed over {n} times") for c, n in started.annotate(n=Count("runs", filter=Q(
        runs__stop_reason__in=HANDOVER_STOPS) | Q(runs__outcome="handed_to_person"))).filter(n__gte=2).order_by(
        "-n", "pk").values_list("public_id", "n")[:limit]]
    looks, seen = [], set()
    for turn in range(limit):
        for listed in (ratings, waits, handovers):
            if turn < len(listed) and listed[turn][0] not in seen and len(looks) < limit:
                seen.add(listed[turn][0])
                looks.append(Look(str(listed[turn][0]), listed[turn][1],
                                  desk_url(f"/console/conversations/{listed[turn][0]}/")))
    return looks



def _waited(asked: datetime, decided: datetime | None, now: datetime) -> str:
    minutes = round(((decided or now) - asked).total_seconds() / 60)
    return f"an approval waited {minutes} min" + ("" if decided else ", still waiting")


# -- who gets it -------------------------------------------------------------------------------------------

def is_lead(user) -> bool:
    return any(lead.pk == user.pk for lead in permissions.leads())


def digest_opt_in(*, user, on: bool) -> bool:
    """A lead turns their morning digest on or off; False (nothing changed) for anyone who is not a lead."""
    if not is_lead(user):
        return False
    if on:
        DigestOptIn.objects.get_or_create(user=user)
    else:
        DigestOptIn.objects.filter(user=user).delete()
    return True


def digest_wanted(user) -> bool:
    return DigestOptIn.objects.filter(user=user).exists()


# -- sending -------------------------------------------------------------------------------------------------

def recipients() -> list:
    """The leads who opted in (active, with an e-mail address)."""
    opted = set(DigestOptIn.objects.values_list("user_id", flat=True))
    return [u for u in permissions.leads() if u.pk in opted and u.email]


def digests_send(*, now: datetime | None = None) -> list[str]:
    """Send today's digest to each lead who opted in and has not had it, once REPORTS_DIGEST_HOUR has come in
    the desk's time zone; the addresses sent to."""
    local = (now or timezone.now()).astimezone(desk_zone())
    if local.hour < settings.REPORTS_DIGEST_HOUR:
        return []
    to = [user for user in recipients() if _claim(user, local.date())]
    if not to:
        return []
    figures, looks = digest_figures(local.date()), worth_a_look(local.date())
    sent = []
    for user in to:
        try:
            digest_email(user, local.date(), figures, looks).send()
        except Exception:  # one address failing never stops the others; its claim stays: at most once
            log.exception("morning digest not e-mailed to user id %s", user.pk)
            continue
        _slack(user, local.date(), figures, looks)
        DigestSent.objects.filter(user=user, day=local.date()).update(sent_at=timezone.now())
        sent.append(user.email)
    log.info("morning digest sent to %d leads", len(sent))
    return sent


def _claim(user, day: date) -> bool:
    try:
        with transaction.atomic():
            DigestSent.objects.create(user=user, day=day)
        return True
    except IntegrityError:
        return False


def _context(user, today: date, figures: list[dict], looks: list[Look]) -> dict:
    yesterday = today - timedelta(days=1)
    return {"name": user.get_short_name() or user.get_username(), "day": yesterday.strftime("%A %-d %B %Y"),
            "rows": [{**row, **{k: shown({"value": row[k], "unit": row["unit"]})
                                for k in ("yesterday", "week_ago", "week_before")}} for row in figures],
            "looks": looks, "reports_url": desk_url("/console/reports/")}


def digest_email(user, today: date, figures: list[dict], looks: list[Look]) -> EmailMultiAlternatives:
    context = _context(user, today, figures, looks)
    message = EmailMultiAlternatives(
        subject=f"Support desk: {context['day']}", body=render_to_string("support/email/report_digest.txt", context),
        to=[user.email], headers={"Auto-Submitted": "auto-generated"})
    message.attach_alternative(render_to_string("support/email/report_digest.html", context), "text/html")
    return message


def slack_text(context: dict) -> str:
    """The digest as Slack mrkdwn; every text from the desk escaped (slack.escaped)."""
    lines = [f"*Support desk, {slack.escaped(context['day'])}* (yesterday · same day a week before · the week before)"]
    lines += [f"{slack.escaped(r['label'])}: {r['yesterday']} · {r['week_ago']} · {r['week_before']}"
              for r in context["rows"]]
    lines += ["*Worth a look*"] + [f"<{look.url}|{slack.escaped(look.why)}>" for look in context["looks"]]
    lines.append(f"<{context['reports_url']}|Open the reports>")
    return "\n".join(lines)


def _slack(user, today: date, figures: list[dict], looks: list[Look]) -> None:
    """A direct message to the lead's linked Slack account, when Slack is set up; a failure is logged only."""
    account = SlackAccount.objects.filter(user=user).first()
    if account is None or not slack.enabled():
        return
    try:
        slack.direct_message(account.slack_user_id, slack_text(_context(user, today, figures, looks)))
    except SlackApiError:
        log.warning("morning digest not sent to Slack for user id %s", user.pk, exc_info=True)
