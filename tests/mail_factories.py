"""Mail as customers' clients write it, as bytes: for the inbound e-mail tests."""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import make_msgid


def mail(*, sender="Maya Lin <maya@example.com>", to="support@shop.example", subject="Where is my parcel?",
         text="Where is my parcel? It was due Monday.", html: str | None = None, message_id: str | None = None,
         in_reply_to: str | None = None, references: str | None = None, headers: dict | None = None,
         files: list[tuple[str, str, bytes]] = ()) -> bytes:
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Message-ID"] = message_id or make_msgid(domain="mail.example")
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to
    if references:
        msg["References"] = references
    if text or html is None:
        msg.set_content(text)
        if html is not None:
            msg.add_alternative(html, subtype="html")
    else:  # an HTML-only mail
        msg.set_content(html, subtype="html")
    for name, value in (headers or {}).items():  # after the content: setting it drops Content-* headers
        msg[name] = value
    for name, content_type, data in files:
        maintype, subtype = content_type.split("/")
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return msg.as_bytes()


def bounce(*, failed: str, original_id: str, sender="MAILER-DAEMON@mx.example") -> bytes:
    """A delivery status notification (RFC 3464) for mail the desk sent to `failed`."""
    boundary = "dsn-boundary"
    return (
        f"From: Mail Delivery System <{sender}>\r\nTo: support@shop.example\r\nSubject: Undelivered Mail\r\n"
        f"Message-ID: {make_msgid(domain='mx.example')}\r\nAuto-Submitted: auto-replied\r\nMIME-Version: 1.0\r\n"
        f"Content-Type: multipart/report; report-type=delivery-status; boundary=\"{boundary}\"\r\n\r\n"
        f"--{boundary}\r\nContent-Type: text/plain\r\n\r\nYour message could not be delivered.\r\n"
        f"--{boundary}\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.example\r\n\r\n"
        f"Final-Recipient: rfc822; {failed}\r\nAction: failed\r\nStatus: 5.1.1\r\n"
        f"Diagnostic-Code: smtp; 550 5.1.1 User unknown\r\n\r\n"
        f"--{boundary}\r\nContent-Type: text/rfc822-headers\r\n\r\nMessage-ID: <{original_id}>\r\nTo: {failed}\r\n"
        f"Subject: New reply from Sundry support\r\n\r\n--{boundary}--\r\n"
    ).encode()
