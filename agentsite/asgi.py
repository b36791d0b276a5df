"""ASGI entry point: Django for HTTP, Channels for websockets (the Django app is built before routing)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

from support.web.asgi_handler import sync_chain_asgi_application  # noqa: E402

django_asgi_app = sync_chain_asgi_application()  # get_asgi_application(), its middleware run in one thread

from django.conf import settings  # noqa: E402

if settings.DEBUG:  # the widget and console scripts, without a separate static server in development
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from support.web.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter({
    "http": django_asgi_app,
    "websocket": URLRouter(websocket_urlpatterns),
})
