"""Providers' inbound e-mail webhooks (support/web/views/inbound.py; setting them up: docs/email.md)."""

from django.urls import path

from support.web.views import inbound

urlpatterns = [
    path("inbound/<str:provider>/", inbound.webhook, name="email-inbound"),
]
