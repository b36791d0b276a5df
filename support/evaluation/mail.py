"""The customer's side of an e-mail scenario: the desk's answer e-mail they reply to, and the mail their client
writes (a new mail, a reply quoting the answer, an out-of-office answer).
"""

from __future__ import annotations

from datetime import timedelta
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from django.conf import settings
from django.core import mail
from django.utils import timezone

from support.customers import notify
from support.models import Conversation, Customer

# While an e-mail scenario plays: the desk's address, and its answer e-mails kept here (django.core.mail.outbox).
DESK_ADDRESS = "support@sundry.example"
MAIL_SETTINGS = {"EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
                 "INBOUND_EMAIL_ADDRESS": DESK_ADDRESS, "REPLY_EMAILS": True}


def desk_answer(conversation: Conversation | None, customer: Customer):
    """The desk's latest answer e-mail to the customer, once the reply e-mails due have gone out."""
    if conversation is None:
        return None
    notify.send_reply_emails(now=timezone.now() + timedelta(minutes=settings.REPLY_EMAIL_AFTER_MINUTES + 1))
    sent = [m for m in mail.outbox if customer.email in m.to]
    return sent[-1] if sent else None


def customer_mail(customer: Customer, turn, answer) -> bytes:
    """The customer's mail as their mail client writes it: a reply goes to the answer's Reply-To, carries its
    In-Reply-To and References, and quotes it below the new words."""
    out = EmailMessage()
    out["From"] = f"{customer.name} <{customer.email}>"
    out["Date"] = formatdate()
    out["Message-ID"] = make_msgid(domain="mail.customer.example")
    if answer is None:
        out["To"], out["Subject"] = DESK_ADDRESS, "A question about my order"
        out.set_content(turn.say)
        return out.as_bytes()
    headers = answer.extra_headers
    out["To"] = headers.get("Reply-To") or DESK_ADDRESS
    subject = answer.subject if answer.subject.lower().startswith("re:") else f"Re: {answer.subject}"
    out["Subject"] = f"Out of office: {answer.subject}" if turn.email == "auto-reply" else subject
    out["In-Reply-To"] = headers["Message-ID"]
    out["References"] = " ".join(filter(None, [headers.get("References"), headers["Message-ID"]]))
    if turn.email == "auto-reply":
        out["Auto-Submitted"] = "auto-replied"
    quoted = "\n".join(f"> {line}" for line in answer.body.splitlines())
    out.set_content(f"{turn.say}\n\nOn {headers.get('Date') or formatdate()}, Sundry support <{DESK_ADDRESS}> "
                    f"wrote:\n{quoted}\n")
    return out.as_bytes()
