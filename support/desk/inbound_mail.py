"""Mail from customers, by whatever way it came (a provider's webhook, the polled mailbox): one path.

receive() stores each mail once (by Message-ID), tells a person's mail from a machine's (auto-replies,
bounces, our own mail coming back), threads it into its conversation (the signed reply address, then
In-Reply-To / References: each only for the conversation's own customer) or starts a new one, and saves
its new words and checked files as the customer's message, handed to a run like a widget message."""

from __future__ import annotations

import logging
import re

from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, transaction

from support import profiles
from support.customers import attachments, identity, languages, mail_reading, reply_address, signin
from support.desk import services, uploads
from support.models import Conversation, Customer, InboundEmail, Message, OutboundEmail, UndeliverableAddress
from support.models.attachments import remove_stored
from support.ops import limits

log = logging.getLogger(__name__)


def receive(raw: bytes, *, source: str) -> InboundEmail:
    """The mail's record: new, or the one stored before for the same Message-ID (a retried webhook)."""
    if len(raw) > settings.INBOUND_EMAIL_MAX_BYTES:
        mail_id, sender, subject = mail_reading.headers_only(raw)
        return _record(mail_id, source=source, sender=sender, subject=subject, raw=b"", size=len(raw),
                       outcome=InboundEmail.TOO_LARGE,
                       detail=f"Larger than {attachments.limit_size(settings.INBOUND_EMAIL_MAX_BYTES)}: not read.")
    mail = mail_reading.read(raw)
    stored = InboundEmail.objects.filter(mail_id=mail.mail_id).first()
    if stored is not None:
        return stored
    base = {"source": source, "sender": mail.sender or "", "subject": mail.subject, "raw": raw, "size": len(raw)}
    if _is_loop(mail):
        return _record(mail.mail_id, **base, outcome=InboundEmail.LOOP, detail="Our own mail came back.")
    if mail.kind == mail_reading.BOUNCE:
        return _bounce(mail, base)
    if mail.sender is None:
        return _record(mail.mail_id, **base, outcome=InboundEmail.REFUSED, detail="No sender address we can read.")
    conversation = thread(mail)
    if mail.kind == mail_reading.AUTO_REPLY:
        return _record(mail.mail_id, **base, outcome=InboundEmail.AUTO_REPLY, conversation=conversation,
                       detail="An automatic reply (out of office or similar): no answer sent.")
    try:
        limits.hit_or_count_here("mails from one sender", limits.mails_from(mail.sender))
    except limits.Limited:
        return _record(mail.mail_id, **base, outcome=InboundEmail.RATE_LIMITED, conversation=conversation,
                       detail=f"More than {settings.INBOUND_EMAILS_PER_SENDER_PER_HOUR} mails from this sender "
                              "in an hour: kept, not answered.")
    if conversation is None:
        try:
            limits.hit_or_count_here("conversations started by e-mail", limits.conversations_by_mail())
        except limits.Limited:
            return _record(mail.mail_id, **base, outcome=InboundEmail.RATE_LIMITED,
                           detail=f"More than {settings.INBOUND_EMAIL_CONVERSATIONS_PER_HOUR} conversations started "
                                  "by e-mail in an hour: kept, not answered.")
    return _save(mail, base, conversation)


def _record(mail_id: str, **fields) -> InboundEmail:
    """Store the mail once; two deliveries at once: the second finds the first's row."""
    try:
        with transaction.atomic():
            return InboundEmail.objects.create(mail_id=mail_id, **fields)
    except IntegrityError:
        return InboundEmail.objects.get(mail_id=mail_id)


def _is_loop(mail: mail_reading.Mail) -> bool:
    own = settings.INBOUND_EMAIL_ADDRESS.lower()
    if own and mail.sender and mail.sender == identity.canonical_email(own):
        return True
    return OutboundEmail.objects.filter(mail_id=mail.mail_id).exists()


# -- threading ----------------------------------------------------------------------------------------------

def thread(mail: mail_reading.Mail) -> Conversation | None:
    """The conversation this mail continues, or None for a new one. Never someone else's: each way of
    matching counts only for the conversation's own customer, and a reply address that is ours in form
    but does not verify (forged, too old, revoked) matches nothing at all."""
    try:
        addressed = reply_address.conversation_for(mail.recipients)
    except reply_address.Stale as why:
        log.info("mail %s: reply address not accepted (%s); it starts a new conversation", mail.mail_id, why)
        return None
    if addressed is not None:
        return addressed if _senders(addressed, mail) else None
    if not mail.answers:
        return None
    ids = dict(OutboundEmail.objects.filter(mail_id__in=mail.answers).values_list("mail_id", "conversation_id"))
    ids.update({k: v for k, v in InboundEmail.objects.filter(mail_id__in=mail.answers, conversation__isnull=False)
                .values_list("mail_id", "conversation_id") if k not in ids})
    for mail_id in mail.answers:  # In-Reply-To first, then the newest reference
        if mail_id in ids:
            found = Conversation.objects.select_related("customer").get(pk=ids[mail_id])
            if _senders(found, mail):
                return found
    return None


def _senders(conversation: Conversation, mail: mail_reading.Mail) -> bool:
    return identity.canonical_email(conversation.customer.email) == mail.sender


def _customer(mail: mail_reading.Mail) -> Customer:
    """The shop's customer with that address, or a new record for a stranger (who sees no order either way
    until they give one of theirs: see Conversation.UNVERIFIED)."""
    found = identity.customer_by_email(mail.sender)
    if found is not None:
        return found
    name = mail.sender_name or mail.sender.split("@")[0]
    return Customer.objects.get_or_create(email=mail.sender, defaults={"name": name[:120]})[0]


# -- saving ---------------------------------------------------------------------------------------------------

def _words(mail: mail_reading.Mail, notes: list[str]) -> str:
    text = mail.text
    if notes:
        text = (text + "\n\n" if text else "") + "\n".join(notes)
    if len(text.encode("utf-8")) > settings.MAX_MESSAGE_BYTES:
        cut = text.encode("utf-8")[:settings.MAX_MESSAGE_BYTES - 200].decode("utf-8", "ignore")
        text = cut + "\n[The rest of this e-mail was too long and was cut here.]"
    return text


def _files(mail: mail_reading.Mail) -> tuple[list[attachments.Prepared], list[str]]:
    """The files that pass the widget's checks (type by content, size, pixels; photos re-encoded); a line
    saying why for each that does not."""
    prepared, notes = [], []
    for index, (name, data) in enumerate(mail.files):
        if index >= settings.ATTACHMENTS_PER_MESSAGE:
            notes.append(f"[{len(mail.files) - index} more attached files were not kept: at most "
                         f"{settings.ATTACHMENTS_PER_MESSAGE} per message.]")
            break
        try:
            prepared.append(attachments.prepare(SimpleUploadedFile(name or "file", data)))
        except attachments.Refused as refused:
            notes.append(f"[An attached file was not kept: {refused}]")
    return prepared, notes


def _save(mail: mail_reading.Mail, base: dict, conversation: Conversation | None) -> InboundEmail:
    prepared, notes = _files(mail)
    if conversation is not None and prepared:
        try:
            uploads.check_room(conversation, prepared)
        except attachments.Refused as refused:
            prepared, notes = [], notes + [f"[The attached files were not kept: {refused}]"]
    text = _words(mail, notes)
    if not text.strip() and not prepared:
        return _record(mail.mail_id, **base, outcome=InboundEmail.EMPTY, conversation=conversation,
                       detail="No new words and no files in it.")
    try:
        content = services.message_clean(text) if text.strip() else attachments.placeholder([p.kind for p in prepared])
    except services.InvalidMessage as invalid:
        return _record(mail.mail_id, **base, outcome=InboundEmail.REFUSED, conversation=conversation,
                       detail=str(invalid)[:300])
    stored: list[str] = []
    try:
        rows = uploads.files_store(conversation, prepared, stored) if conversation is not None and prepared else []
        with transaction.atomic():
            started = conversation is None
            if started:
                conversation = services.conversation_open(customer=_customer(mail))
                # The customer's language, when their mail client said it: the desk's e-mails are written in it.
                language = languages.language_code(mail.language) or conversation.language
                Conversation.objects.filter(pk=conversation.pk).update(order_scope=Conversation.UNVERIFIED,
                                                                       language=language)
                conversation.order_scope, conversation.language = Conversation.UNVERIFIED, language
                if prepared:
                    rows = uploads.files_store(conversation, prepared, stored)
            message = services.message_append(conversation=conversation, wire={"role": "user", "content": content},
                                               author=Message.CUSTOMER, channel=Message.EMAIL)
            _verify_order(conversation, mail)
            if mail.subject:  # the console shows the latest one
                Conversation.objects.filter(pk=conversation.pk).update(email_subject=mail.subject[:250])
            for row in rows:
                row.message, row.conversation = message, conversation
                row.save(force_insert=True)
            record = InboundEmail.objects.create(
                mail_id=mail.mail_id, **base, conversation=conversation, message=message,
                outcome=InboundEmail.STARTED if started else InboundEmail.ATTACHED)
            _hand_on(conversation)
    except IntegrityError:  # the same mail saved meanwhile by another delivery: that one stands
        remove_stored(stored)
        return InboundEmail.objects.get(mail_id=mail.mail_id)
    except BaseException:
        remove_stored(stored)
        raise
    log.info("mail %s from conversation %s's customer saved as message %s", mail.mail_id,
             conversation.public_id, message.seq)
    return record


SET_UP_REASON = "Written while the desk was being set up: no agent answered. Please reply in person."


def _hand_on(conversation: Conversation) -> None:
    """To the agent; or, while the desk is being set up (no profile published), kept for a person: no run."""
    if profiles.being_set_up():
        services.conversation_flag(conversation_id=conversation.pk, reason=SET_UP_REASON)
        return
    services.run_start_if_idle(conversation_id=conversation.pk, current=conversation)


_ORDER_NUMBER = re.compile(r"\b[A-Za-z]{1,6}-[0-9]{1,12}\b")
MAIL_ADDRESS = "e-mail"  # mail has no client address: all of it counts as one, for the sign-in limits and alert


def _verify_order(conversation: Conversation, mail: mail_reading.Mail) -> None:
    """An e-mail conversation that sees no order yet, whose customer names an order of theirs (the sender's
    address owns it, as the widget's e-mail + order number way in checks), sees that order from now on. The
    first few numbers named are tried, each a sign-in guess: counted against the sender's e-mail with the
    widget's guesses (and, for all mail together, as one client address, MAIL_ADDRESS), alerting alike; past a
    limit, or with the counters away, nothing is looked up."""
    if conversation.order_scope != Conversation.UNVERIFIED:
        return
    for number in list(dict.fromkeys(_ORDER_NUMBER.findall(mail.text)))[:3]:
        try:
            order = signin.by_order(email=mail.sender, order_number=number, address=MAIL_ADDRESS)
        except signin.WrongOrder:
            continue
        except (signin.CodeRequired, limits.Unavailable):
            log.info("e-mail conversation %s: order numbers not tried (past the sign-in limits, or no counters)",
                     conversation.public_id)
            return
        Conversation.objects.filter(pk=conversation.pk).update(order_scope=order.number)
        conversation.order_scope = order.number
        log.info("e-mail conversation %s: the customer gave order %s of theirs", conversation.public_id,
                 order.number)
        return


# -- bounces -------------------------------------------------------------------------------------------------

def _bounce(mail: mail_reading.Mail, base: dict) -> InboundEmail:
    """A delivery failure: an address is marked undeliverable only when the report quotes the Message-ID of a
    mail the desk sent to that very address. Anyone can write a delivery-status report naming a customer; only
    the receiving server of our mail knows its Message-ID, so a forged report silences no one."""
    ours = list(OutboundEmail.objects.filter(mail_id__in=mail.bounced_ids).values_list("conversation_id", "to"))
    record = _record(mail.mail_id, **base, outcome=InboundEmail.BOUNCE,
                     conversation_id=ours[0][0] if ours else None,
                     detail=("Undeliverable: " + ", ".join(mail.bounced))[:300] if mail.bounced else
                     "A delivery failure notice naming no address we wrote to.")
    sent_to = {identity.canonical_email(to) for _, to in ours}
    for address in mail.bounced:
        if address not in sent_to:
            log.info("bounce %s names an address no mail it quotes was sent to: nothing marked", mail.mail_id)
            continue
        customer = Customer.objects.filter(email__iexact=address).first()
        if customer is not None:
            UndeliverableAddress.objects.update_or_create(
                customer=customer, defaults={"reason": mail.bounce_reason or "The mail could not be delivered.",
                                             "inbound_email": record})
    return record
