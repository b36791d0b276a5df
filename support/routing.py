"""Websocket routes. The widget's socket accepts the shop origins configured; the console's only our hosts."""

from channels.auth import AuthMiddlewareStack
from channels.security.websocket import AllowedHostsOriginValidator, OriginValidator
from django.conf import settings
from django.urls import path, re_path

from support.consumers import CustomerConsumer, StaffConsumer


def widget_origins() -> list[str]:
    # Our own hosts (any scheme and port, as ALLOWED_HOSTS), and the shops that embed the widget.
    return list(settings.WIDGET_ALLOWED_ORIGINS) + list(settings.ALLOWED_HOSTS)


websocket_urlpatterns = [
    # The customer authenticates with a conversation token in its first frame: no cookies involved.
    re_path(r"^ws/conversations/(?P<public_id>[0-9a-fA-F-]{36})/$",
            OriginValidator(CustomerConsumer.as_asgi(), widget_origins())),
    path("ws/staff/", AllowedHostsOriginValidator(AuthMiddlewareStack(StaffConsumer.as_asgi()))),
]
