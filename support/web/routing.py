"""Websocket routes. Each socket accepts pages of its own origin (scheme, host and port) and the origins
configured: the widget's, the shops in WIDGET_ALLOWED_ORIGINS; both, CSRF_TRUSTED_ORIGINS (support/web/origins.py)."""

from channels.auth import AuthMiddlewareStack
from django.urls import path, re_path

from support.web.consumers import CustomerConsumer, NotFoundConsumer, StaffConsumer
from support.web.origins import OriginValidator

websocket_urlpatterns = [
    # The customer authenticates with a conversation token in its first frame: no cookies involved.
    re_path(r"^ws/conversations/(?P<public_id>[0-9a-fA-F-]{36})/$",
            OriginValidator(CustomerConsumer.as_asgi(), "WIDGET_ALLOWED_ORIGINS", "CSRF_TRUSTED_ORIGINS")),
    path("ws/staff/", OriginValidator(AuthMiddlewareStack(StaffConsumer.as_asgi()), "CSRF_TRUSTED_ORIGINS")),
    # Last: any other path is refused at the handshake, rather than the router raising (a 500).
    re_path(r"", NotFoundConsumer.as_asgi()),
]
