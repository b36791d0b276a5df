"""A customer's e-mail, read: who sent it, what it answers (Message-ID, In-Reply-To, References, the
reply address), whether a person wrote it at all (auto-replies, bounces), and only the new words of it
(quoted history and signatures stripped by mail-parser-reply, HTML turned into text) with its files.
Pure reading of bytes: nothing here touches the database."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.utils import getaddresses

from bs4 import BeautifulSoup
from mailparser_reply import EmailReplyParser

from support.customers.identity import canonical_email

PERSON, AUTO_REPLY, BOUNCE = "person", "auto_reply", "bounce"
_MSGID = re.compile(r"<([^<>\s]{1,246})>")
MAX_ANSWERS = 20  # Message-IDs of a mail's In-Reply-To and References looked up
_REPLY_LANGUAGES = ["en", "de", "fr", "es", "it", "nl"]  # headers of quoted mail these clients write


@dataclass
class Mail:
    mail_id: str  # the Message-ID without brackets, or "sha256:<digest>" of the bytes when it has none
    sender: str | None  # canonical From address, None when there is no usable one
    sender_name: str
    recipients: list[str]  # To, Cc and the delivery headers, as written
    subject: str
    answers: list[str]  # Message-IDs it replies to: In-Reply-To first, then References newest first
    kind: str  # PERSON, AUTO_REPLY or BOUNCE
    text: str = ""  # the new words only
    files: list[tuple[str, bytes]] = field(default_factory=list)  # (name, bytes) of its attachments
    bounced: list[str] = field(default_factory=list)  # a bounce: the addresses that failed (canonical)
    bounce_reason: str = ""
    bounced_ids: list[str] = field(default_factory=list)  # a bounce: Message-IDs of the mail that failed
    language: str = ""  # its Content-Language, as written ("de-AT"), when the client said


def message_ids(value) -> list[str]:
    return _MSGID.findall(str(value or ""))


def headers_only(raw: bytes) -> tuple[str, str, str]:
    """(mail id, sender, subject) of a mail too large to read whole: from its first 64 KB."""
    head = message_from_bytes(raw[:65536].split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0], policy=policy.default)
    return _mail_id(head, raw), _sender(head)[0] or "", _subject(head)


def read(raw: bytes) -> Mail:
    msg: EmailMessage = message_from_bytes(raw, policy=policy.default)
    sender, name = _sender(msg)
    recipients = [address for _, address in getaddresses(
        [str(v) for h in ("To", "Cc", "Delivered-To", "X-Original-To", "Envelope-To") for v in msg.get_all(h, [])])
        if address]
    # In-Reply-To, then References newest first; a long thread's oldest references are not needed to find it.
    answers = (message_ids(msg.get("In-Reply-To")) + list(reversed(message_ids(msg.get("References")))))[:MAX_ANSWERS]
    mail = Mail(mail_id=_mail_id(msg, raw), sender=sender, sender_name=name, recipients=recipients,
                subject=_subject(msg), answers=list(dict.fromkeys(answers)), kind=_kind(msg),
                language=str(msg.get("Content-Language", "")).split(",")[0].strip()[:35])
    if mail.kind == BOUNCE:
        _read_bounce(msg, mail)
        return mail
    mail.text = new_words(_body_text(msg))
    mail.files = _files(msg)
    return mail


def _mail_id(msg, raw: bytes) -> str:
    ids = message_ids(msg.get("Message-ID"))
    return ids[0] if ids else "sha256:" + hashlib.sha256(raw).hexdigest()


def _sender(msg) -> tuple[str | None, str]:
    try:
        found = getaddresses([str(msg.get("From", ""))])
    except Exception:  # a header too broken to parse is no sender
        return None, ""
    name, address = found[0] if found else ("", "")
    return canonical_email(address), name.strip()[:120]


def _subject(msg) -> str:
    try:
        return " ".join(str(msg.get("Subject", "")).split())[:250]
    except Exception:
        return ""


# -- a person, or a machine ---------------------------------------------------------------------------------

def _kind(msg) -> str:
    content_type = msg.get_content_type()
    if content_type == "multipart/report" and msg.get_param("report-type", "").lower() == "delivery-status":
        return BOUNCE
    # RFC 3834: anything but "no" was sent by a program (auto-replied, auto-generated, auto-notified).
    if str(msg.get("Auto-Submitted", "no")).strip().lower().split(";")[0] not in ("", "no"):
        return AUTO_REPLY
    if any(msg.get(h) is not None for h in ("X-Autoreply", "X-Autorespond", "X-Autoresponder")):
        return AUTO_REPLY
    if str(msg.get("Precedence", "")).strip().lower() in ("bulk", "list", "junk", "auto_reply"):
        return AUTO_REPLY
    if str(msg.get("X-Auto-Response-Suppress", "")).strip().lower() in ("oof", "all") \
            and str(msg.get("X-MS-Exchange-Inbox-Rules-Loop", "")):
        return AUTO_REPLY
    return PERSON


def _read_bounce(msg, mail: Mail) -> None:
    """The failed recipients and why (RFC 3464's per-recipient fields), and which mail it was."""
    for part in msg.walk():
        kind = part.get_content_type()
        if kind == "message/delivery-status":
            for block in part.get_payload():  # the per-message block, then one per recipient
                action = str(block.get("Action", "")).lower()
                recipient = str(block.get("Final-Recipient") or block.get("Original-Recipient") or "")
                address = canonical_email(recipient.split(";", 1)[-1].strip()) if recipient else None
                if address and action in ("failed", ""):
                    mail.bounced.append(address)
                    status = str(block.get("Status", "")).strip()
                    diagnostic = " ".join(str(block.get("Diagnostic-Code", "")).split(";", 1)[-1].split())
                    mail.bounce_reason = (f"{status} {diagnostic}".strip())[:300]
        elif kind in ("message/rfc822", "text/rfc822-headers", "message/rfc822-headers"):
            inner = part.get_payload(0) if part.is_multipart() else message_from_bytes(
                part.get_payload(decode=True) or b"", policy=policy.default)
            mail.bounced_ids += message_ids(inner.get("Message-ID"))


# -- the words --------------------------------------------------------------------------------------------

def _body_text(msg) -> str:
    """The plain text part; the HTML one, as text, when there is no plain text (or only a blank one)."""
    for kind in ("plain", "html"):
        body = msg.get_body(preferencelist=(kind,))
        if body is None:
            continue
        try:
            content = body.get_content()
        except (LookupError, ValueError):  # an unknown charset: read what can be read
            content = (body.get_payload(decode=True) or b"").decode("utf-8", "replace")
        text = html_to_text(content) if kind == "html" else content
        if text.strip():
            return text
    return ""


def html_to_text(html: str) -> str:
    """An HTML mail as plain text: quoted history (blockquotes, the quote blocks mail clients mark) dropped,
    paragraphs and line breaks kept, nothing of the markup left."""
    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.find_all(["script", "style", "head", "blockquote"]):
        tag.decompose()
    for tag in soup.select(".gmail_quote, .yahoo_quoted, #appendonsend, #divRplyFwdMsg, .moz-cite-prefix"):
        tag.decompose()
    for br in soup.find_all("br"):
        br.replace_with("\n")
    for block in soup.find_all(["p", "div", "li", "tr", "h1", "h2", "h3", "h4"]):
        block.insert_after("\n")
    text = soup.get_text()
    return re.sub(r"\n{3,}", "\n\n", "\n".join(line.strip() for line in text.splitlines())).strip()


def new_words(text: str) -> str:
    """Only what the customer wrote this time: quoted history and the signature stripped."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not text:
        return ""
    try:
        replies = EmailReplyParser(languages=_REPLY_LANGUAGES).read(text).replies
    except Exception:  # the parser is a heuristic: an error in it never loses the customer's words
        return text
    latest = replies[0].body.strip() if replies else ""
    return latest or text


def _files(msg) -> list[tuple[str, bytes]]:
    files = []
    for part in msg.iter_attachments():
        if part.is_multipart() or part.get_content_maintype() == "message":
            continue
        # An inline image with a Content-ID is part of the HTML (a logo in a signature), not something sent.
        if part.get_content_disposition() == "inline" and part.get("Content-ID"):
            continue
        data = part.get_payload(decode=True) or b""
        files.append((part.get_filename() or "file", data))
    return files
