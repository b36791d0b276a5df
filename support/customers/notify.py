"""Reaching a customer who left the page: their widget's presence, the signed links that open a conversation
on any device, and the one e-mail that carries the replies they missed.

Presence is written to the database (FollowUp.seen_at / seen_seq) by the customer socket, so every daphne
process and the beat agree on it. The beat (support.tasks.send_reply_emails) collects, per conversation, the
agent's and staff's replies the customer has not seen (after seen_seq and emailed_seq) once the oldest is
REPLY_EMAIL_AFTER_MINUTES old and the customer has not been connected for as long, and sends one e-mail with
all of them. A customer who wrote by e-mail (their latest message came by e-mail) is answered at once, in the
words of a reply: the task support.tasks.send_reply_email is queued when the answer is saved, and the beat sends
what it missed. Each reply is e-mailed at most once: the batch is claimed with a conditional UPDATE of
emailed_seq before the e-mail goes out, and given back if sending fails.
"""

from __future__ import annotations

import logging
import zoneinfo
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import make_msgid
from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings
from django.core import signing
from django.core.mail import EmailMultiAlternatives
from django.db import IntegrityError, connection, transaction
from django.db.models import F, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce, Greatest
from django.template.loader import render_to_string
from django.utils import dateformat, timezone, translation
from django.utils.translation import gettext, ngettext

from support.customers import faces, languages, reply_address
from support.customers.identity import current_link_version, parse_uuid
from support.customers.words import staff_name
from support.live.events import conversation_group
from support.models import Conversation, Customer, FollowUp, InboundEmail, Message, OutboundEmail, ReplyEmailOptOut

log = logging.getLogger(__name__)

LINK_SALT = "support.conversation-link"  # distinct from the widget's conversation token (support.conversation)
UNSUBSCRIBE_SALT = "support.reply-emails-unsubscribe"
REPLY_AUTHORS = (Message.AGENT, Message.STAFF)  # a person's or the agent's answer; not notices, not tools


# -- the customer's time zone ---------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def valid_time_zone(name) -> str | None:
    """An IANA zone name this server knows ("Europe/Berlin"), else None; never a path or anything else."""
    if not isinstance(name, str) or not 1 <= len(name) <= 64:
        return None
    return name if name in _zones() else None


def zone_of(conversation: Conversation) -> zoneinfo.ZoneInfo | None:
    if Conversation.follow_up.is_cached(conversation):  # read with the conversation (a run's start reads)
        name = getattr(Conversation.follow_up.related.get_cached_value(conversation), "time_zone", None)
    else:
        name = FollowUp.objects.filter(conversation=conversation).values_list("time_zone", flat=True).first()
    return zoneinfo.ZoneInfo(name) if valid_time_zone(name) else None


def set_time_zone(conversation: Conversation, name: str) -> None:
    _follow_up_update(conversation.pk, time_zone=name)


def local_time(moment: datetime, zone: zoneinfo.ZoneInfo | None) -> str:
    """"Tue 14 May, 16:02 (Europe/Berlin)" (day and month in the active language), or in UTC when the
    customer's zone is unknown."""
    at = moment.astimezone(zone or zoneinfo.ZoneInfo("UTC"))
    return f"{dateformat.format(at, 'D j M, H:i')} ({zone.key if zone else 'UTC'})"


# -- presence ---------------------------------------------------------------------------------------------

def _follow_up_update(conversation_pk: int, first: dict | None = None, **fields) -> None:
    """Update the conversation's FollowUp row, making it first if there is none (two makers: one wins).
    `first`: the values a new row is made with instead (fields that read the old row, made right)."""
    if FollowUp.objects.filter(conversation_id=conversation_pk).update(**fields):
        return
    try:
        # One INSERT needs no transaction of its own; inside a caller's, a savepoint keeps a lost race from
        # breaking it.
        with transaction.atomic() if transaction.get_connection().in_atomic_block else nullcontext():
            FollowUp.objects.create(conversation_id=conversation_pk, **(first or {}))
        if first is not None:
            return
    except IntegrityError:
        pass  # made meanwhile by another process
    FollowUp.objects.filter(conversation_id=conversation_pk).update(**fields)


def customer_seen(conversation_pk: int, *, now: datetime | None = None) -> None:
    """A customer socket of the conversation is open now (resumed, heartbeat, or closing): every reply saved
    so far reached it, and no e-mail is due until the customer has been away for a while."""
    now = now or timezone.now()
    # One statement, whether the row is there or not: the conversation's last seq read in it, the row made or
    # updated by INSERT ... ON CONFLICT (never lowered: a later seen wins).
    row = FollowUp(conversation_id=conversation_pk, seen_at=now)
    fields = [f for f in FollowUp._meta.concrete_fields if not f.primary_key and f.attname != "seen_seq"]
    quote = connection.ops.quote_name
    table, seen_at, seen_seq = (quote(n) for n in (FollowUp._meta.db_table, FollowUp._meta.get_field("seen_at").column,
                                                    FollowUp._meta.get_field("seen_seq").column))
    conversation_id = quote(FollowUp._meta.get_field("conversation").column)
    greatest = "GREATEST" if connection.vendor == "postgresql" else "MAX"
    last_seq = (f"(SELECT {quote(Conversation._meta.get_field('last_seq').column)} FROM "
                f"{quote(Conversation._meta.db_table)} WHERE {quote(Conversation._meta.pk.column)} = %s)")
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(quote(f.column) for f in fields)}, {seen_seq}) "
            f"SELECT {', '.join(['%s'] * len(fields))}, COALESCE({last_seq}, 0) WHERE 1 = 1 "
            f"ON CONFLICT ({conversation_id}) DO UPDATE SET {seen_at} = excluded.{seen_at}, "
            f"{seen_seq} = {greatest}({table}.{seen_seq}, excluded.{seen_seq})",
            [f.get_db_prep_save(f.pre_save(row, True), connection) for f in fields] + [conversation_pk])


# -- signed links -----------------------------------------------------------------------------------------

def link_token(conversation: Conversation) -> str:
    """The e-mailed link's token: opens this conversation on any device for CONVERSATION_LINK_MAX_AGE, until
    the conversation's links are revoked. Signed with SECRET_KEY, with a salt of its own."""
    return signing.dumps({"c": str(conversation.public_id), "v": current_link_version(conversation.public_id)},
                         salt=LINK_SALT)


def link_access(token) -> tuple[Conversation, int] | None:
    """(conversation, link version) for a valid, unexpired, unrevoked link; None otherwise (all look the same)."""
    if not isinstance(token, str) or not 1 <= len(token) <= 300:
        return None
    try:
        data = signing.loads(token, salt=LINK_SALT, max_age=settings.CONVERSATION_LINK_MAX_AGE)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("c"), str) or not _is_uuid(data["c"]):
        return None
    conversation = Conversation.objects.filter(public_id=data["c"]).select_related("customer").first()
    if conversation is None:
        return None
    version = current_link_version(conversation.public_id)
    return (conversation, version) if data.get("v") == version else None


def conversation_for_link(token) -> Conversation | None:
    access = link_access(token)
    return access[0] if access else None


def links_revoke(conversation: Conversation) -> int:
    """Every link e-mailed for this conversation stops working, and so does every conversation token a link
    was exchanged for; customer sockets opened with one close (after the commit, so none reconnects in
    between and reads the old version). The next e-mail carries a new link. Returns the new version."""
    _follow_up_update(conversation.pk, link_version=F("link_version") + 1)
    version = current_link_version(conversation.public_id)
    public_id = conversation.public_id
    transaction.on_commit(lambda: _close_link_sockets(public_id, version))
    return version


def _close_link_sockets(public_id, version: int) -> None:
    """Tell the conversation's customer sockets that links before `version` are revoked. Never raises: a
    socket that misses it finds out at its next frame (support.web.consumers.CustomerConsumer)."""
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(conversation_group(public_id), {"type": "links.revoked", "version": version})
    except Exception:
        log.warning("customer sockets of conversation %s not told their link was revoked", public_id, exc_info=True)


def unsubscribe_token(customer: Customer) -> str:
    """Never expires: an unsubscribe link must work whenever the customer finds the e-mail."""
    return signing.dumps(str(customer.public_id), salt=UNSUBSCRIBE_SALT)


def customer_for_unsubscribe(token) -> Customer | None:
    if not isinstance(token, str) or not 1 <= len(token) <= 300:
        return None
    try:
        public_id = signing.loads(token, salt=UNSUBSCRIBE_SALT)
    except signing.BadSignature:
        return None
    return Customer.objects.filter(public_id=public_id).first() if _is_uuid(public_id) else None


def reply_emails_stop(customer: Customer) -> None:
    ReplyEmailOptOut.objects.get_or_create(customer=customer)


def reply_emails_resume(customer: Customer) -> None:
    ReplyEmailOptOut.objects.filter(customer=customer).delete()


def _is_uuid(value) -> bool:
    return parse_uuid(value) is not None


def desk_url(path: str) -> str:
    return settings.DESK_PUBLIC_URL.rstrip("/") + path


# -- the batch --------------------------------------------------------------------------------------------

def _replies(conversation_pk: int, after_seq: int):
    return (Message.objects.filter(conversation_id=conversation_pk, seq__gt=after_seq, role="assistant",
                                   author__in=REPLY_AUTHORS)
            .exclude(content__isnull=True).exclude(content="").select_related("author_user").order_by("seq"))


def by_email(conversation_pk: int) -> bool:
    """The customer's latest message came by e-mail: they read our answers as e-mail."""
    return (Message.objects.filter(conversation_id=conversation_pk, author=Message.CUSTOMER).order_by("-seq")
            .values_list("channel", flat=True).first()) == Message.EMAIL


def due_conversations(now: datetime, *, only: int | None = None) -> list[int]:
    """Conversations with a reply the customer has not seen nor been e-mailed, whose customer still wants these
    e-mails and whose address has not bounced: at once when the customer wrote by e-mail; otherwise once the
    reply is older than the wait and the customer has not been connected during it. `only`: that one."""
    wait = timedelta(minutes=settings.REPLY_EMAIL_AFTER_MINUTES)
    oldest = now - timedelta(hours=settings.REPLY_EMAIL_WITHIN_HOURS)  # older replies are history, not news
    done = Greatest(Coalesce(F("conversation__follow_up__emailed_seq"), Value(0)),
                    Coalesce(F("conversation__follow_up__seen_seq"), Value(0)))
    channel = (Message.objects.filter(conversation=OuterRef("conversation"), author=Message.CUSTOMER)
               .order_by("-seq").values("channel")[:1])
    left = Q(created_at__lte=now - wait) & ~Q(conversation__follow_up__seen_at__gt=now - wait)
    replies = (Message.objects.filter(role="assistant", author__in=REPLY_AUTHORS, created_at__gte=oldest)
               .filter(**({"conversation_id": only} if only is not None else {}))
               .exclude(content__isnull=True).exclude(content="")
               .annotate(done=done, channel_now=Subquery(channel)).filter(seq__gt=F("done"))
               .filter(left | Q(channel_now=Message.EMAIL))
               .exclude(conversation__customer__reply_email_opt_out__isnull=False)
               .exclude(conversation__customer__undeliverable__isnull=False))  # a mail to them bounced
    return sorted(set(replies.values_list("conversation_id", flat=True)))


@dataclass
class Sent:
    conversation: str
    to: str
    seqs: list[int]


def send_reply_email_now(conversation_pk: int, *, now: datetime | None = None) -> list[Sent]:
    """The conversation's replies, now, when its customer wrote by e-mail (queued when an answer is saved)."""
    return send_reply_emails(now=now, only=conversation_pk)


def send_reply_emails(*, now: datetime | None = None, only: int | None = None) -> list[Sent]:
    """One e-mail per due conversation with every reply not seen nor e-mailed yet; what was sent."""
    now = now or timezone.now()
    if not settings.REPLY_EMAILS:
        return []
    sent = []
    for conversation_pk in due_conversations(now, only=only):
        try:
            done = _send_one(conversation_pk, now)
        except Exception:  # one bad conversation never stops the others; the next beat tries it again
            log.exception("reply e-mail for conversation id %s not sent", conversation_pk)
            continue
        if done is not None:
            sent.append(done)
    return sent


def _send_one(conversation_pk: int, now: datetime) -> Sent | None:
    _follow_up_update(conversation_pk)  # the row the claim updates exists
    follow_up = FollowUp.objects.get(conversation_id=conversation_pk)
    before, seen = follow_up.emailed_seq, follow_up.seen_seq
    replies = list(_replies(conversation_pk, max(before, seen)))
    if not replies:
        return None
    upto = replies[-1].seq
    # The claim: only the process whose UPDATE finds emailed_seq and seen_seq as read sends this batch. A
    # second beat, or the customer coming back meanwhile, finds them changed and sends nothing.
    if not FollowUp.objects.filter(pk=follow_up.pk, emailed_seq=before, seen_seq=seen).update(
            emailed_seq=upto, emailed_at=now):
        return None
    conversation = Conversation.objects.select_related("customer").get(pk=conversation_pk)
    try:
        message = _email(conversation, replies, follow_up)
        message.send()
    except Exception:
        # Not sent: give the batch back (unless a later claim moved on), so the next beat sends it.
        FollowUp.objects.filter(pk=follow_up.pk, emailed_seq=upto).update(emailed_seq=before,
                                                                          emailed_at=follow_up.emailed_at)
        raise
    try:  # sent: a failure to note its Message-ID must not send it again (threading falls back on the address)
        OutboundEmail.objects.create(conversation=conversation, to=conversation.customer.email.lower(),
                                     mail_id=message.extra_headers["Message-ID"].strip("<>"))
    except Exception:
        log.warning("reply e-mail of conversation %s: its Message-ID not kept", conversation.public_id, exc_info=True)
    log.info("reply e-mail sent for conversation %s: %d replies", conversation.public_id, len(replies))
    return Sent(str(conversation.public_id), conversation.customer.email, [m.seq for m in replies])


def _author(message: Message) -> str:
    if message.author == Message.STAFF and message.author_user_id:
        return gettext("%(name)s from %(shop)s support") % {"name": staff_name(message.author_user),
                                                            "shop": faces.shop_name()}
    return faces.agent_label()


def _email(conversation: Conversation, replies: list[Message], follow_up: FollowUp) -> EmailMultiAlternatives:
    """The e-mail, in the conversation's language (languages.of: what the widget set)."""
    with translation.override(languages.of(conversation)):
        return _email_in_language(conversation, replies, follow_up)


def _email_in_language(conversation: Conversation, replies: list[Message], follow_up: FollowUp):
    zone = zoneinfo.ZoneInfo(follow_up.time_zone) if valid_time_zone(follow_up.time_zone) else None
    customer = conversation.customer
    unsubscribe = desk_url(f"/c/unsubscribe/{unsubscribe_token(customer)}/")
    mailed = by_email(conversation.pk)  # a reply to their e-mail, not a catch-up on the widget
    context = {
        **faces.email_context(),
        "name": customer.name.split()[0] if customer.name.strip() else "",
        "replies": [{"author": _author(m), "at": local_time(m.created_at, zone), "text": m.content} for m in replies],
        "link": desk_url(f"/c/{link_token(conversation)}/"),
        "unsubscribe": unsubscribe,
        "language": translation.get_language(),
        "by_email": mailed,
    }
    count = len(replies)
    subject = ngettext("New reply from %(shop)s support", "%(count)d new replies from %(shop)s support",
                       count) % {"count": count, "shop": faces.shop_name()}
    headers = {"Auto-Submitted": "auto-generated", **_thread_headers(conversation)}
    if not mailed:
        headers.update({"List-Unsubscribe": f"<{unsubscribe}>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"})
    if headers.get("Subject"):
        subject = headers.pop("Subject")
    message = EmailMultiAlternatives(
        subject=subject, body=render_to_string("support/email/replies.txt", context), to=[customer.email],
        from_email=faces.sender(), headers=headers)
    message.attach_alternative(render_to_string("support/email/replies.html", context), "text/html")
    return message


def _thread_headers(conversation: Conversation) -> dict:
    """A Message-ID the desk keeps (OutboundEmail, written once sent), the signed reply address, and when the
    customer wrote by e-mail, In-Reply-To / References and "Re: <their subject>": the answer lands in their
    thread, and their reply comes back to this conversation (support/desk/inbound_mail.py)."""
    domain = (settings.INBOUND_EMAIL_ADDRESS.rpartition("@")[2]
              or urlsplit(settings.DESK_PUBLIC_URL).hostname or "desk.invalid")
    headers = {"Message-ID": make_msgid(idstring="reply", domain=domain)}
    address = reply_address.reply_address(conversation)
    if address:
        headers["Reply-To"] = address
    mails = list(InboundEmail.objects.filter(conversation=conversation, message__isnull=False)
                 .order_by("-received_at", "-pk").values_list("mail_id", "subject")[:1])
    if mails:
        last_id, last_subject = mails[0]
        sent = list(OutboundEmail.objects.filter(conversation=conversation).order_by("-sent_at", "-pk")
                    .values_list("mail_id", flat=True)[:8])
        chain = list(dict.fromkeys([*reversed(sent), last_id]))
        headers["In-Reply-To"] = f"<{last_id}>"
        headers["References"] = " ".join(f"<{i}>" for i in chain)
        if last_subject:
            headers["Subject"] = last_subject if last_subject.lower().startswith("re:") else f"Re: {last_subject}"
    return headers
