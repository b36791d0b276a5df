"""Providers' inbound webhooks (/email/inbound/<provider>/): a customer's mail, posted by Mailgun, Postmark,
SendGrid or Amazon SES, read by django-anymail and handed to the desk's one path for mail
(support/desk/inbound_mail.py).

Each post is authenticated before its body is read: HTTP basic auth with INBOUND_WEBHOOK_SECRET
("user:password", in the URL the provider is given) is checked here from the headers, with anymail's own check,
so a stranger's large post is refused without being read; then anymail checks it again and, for Mailgun, the
signature in the body (HMAC with INBOUND_MAILGUN_SIGNING_KEY). A post without them is refused with 400 and
saves nothing. With no secret set
the webhooks are off (404): anymail alone would accept unauthenticated posts with a warning.
"""

from __future__ import annotations

import logging

from anymail.exceptions import AnymailWebhookValidationFailure
from anymail.signals import inbound
from anymail.webhooks.base import AnymailBasicAuthMixin
from anymail.webhooks.amazon_ses import AmazonSESInboundWebhookView
from anymail.webhooks.mailgun import MailgunInboundWebhookView
from anymail.webhooks.postmark import PostmarkInboundWebhookView
from anymail.webhooks.sendgrid import SendGridInboundWebhookView
from django.conf import settings
from django.dispatch import receiver
from django.http import HttpResponse, HttpResponseBadRequest, HttpResponseNotFound
from django.views.decorators.csrf import csrf_exempt

from support.customers.signin import email_digest
from support.desk import inbound_mail
from support.ops import limits

log = logging.getLogger(__name__)
security_log = logging.getLogger("support.security")

PROVIDERS = {
    "mailgun": MailgunInboundWebhookView,
    "postmark": PostmarkInboundWebhookView,
    "sendgrid": SendGridInboundWebhookView,
    "amazon_ses": AmazonSESInboundWebhookView,
}


def enabled(provider: str) -> bool:
    """On when the desk reads mail and the webhook's credentials are set (settings.ANYMAIL, made from
    INBOUND_WEBHOOK_SECRET and INBOUND_MAILGUN_SIGNING_KEY)."""
    credentials = getattr(settings, "ANYMAIL", {})
    if not settings.INBOUND_EMAIL_ADDRESS or not credentials.get("WEBHOOK_SECRET"):
        return False
    return provider != "mailgun" or bool(credentials.get("MAILGUN_WEBHOOK_SIGNING_KEY"))


@csrf_exempt  # providers send no cookie nor CSRF token; anymail checks their credentials instead
def webhook(request, provider: str):
    view = PROVIDERS.get(provider)
    if view is None or not enabled(provider):
        return HttpResponseNotFound("No such e-mail webhook here.", content_type="text/plain")
    # A new view per request: anymail reads its settings (the secret, the signing key) when it is made.
    handler = view.as_view()
    if not _basic_auth_ok(view, request):
        security_log.warning("inbound e-mail webhook %s refused from %s: missing or wrong basic auth", provider,
                             limits.request_address(request))
        return HttpResponseBadRequest("Missing or invalid credentials.", content_type="text/plain")
    if request.content_type in ("application/json", "text/plain") and request.method == "POST":
        # Postmark and Amazon SES post the mail inside JSON: a mail with a photo is past Django's
        # DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB), which guards the desk's own API. Here the bound is the mail's
        # own (INBOUND_EMAIL_MAX_BYTES, base64 making it a third larger), read before anymail asks for the body.
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        if length > settings.INBOUND_EMAIL_MAX_BYTES * 4 // 3 + 65536:
            return HttpResponse("This mail is larger than the desk takes.", status=413, content_type="text/plain")
        request._body = request.read(length)  # what request.body returns from now on
    return handler(request)


def _basic_auth_ok(view, request) -> bool:
    """anymail's basic-auth check, run before anything reads the body (it looks at the headers alone)."""
    try:
        AnymailBasicAuthMixin.validate_request(view(), request)
    except AnymailWebhookValidationFailure:
        return False
    return True


@receiver(inbound, dispatch_uid="support.inbound-mail")
def _mail_received(sender, event, esp_name, **kwargs):
    """anymail has authenticated and parsed the post: the mail's bytes go down the one path. An error here
    answers 500, which providers retry; the retry is stored once (the mail's Message-ID)."""
    record = inbound_mail.receive(event.message.as_bytes(), source=esp_name)
    log.info("mail %s from %s by %s: %s", record.mail_id, email_digest(record.sender), esp_name, record.outcome)
