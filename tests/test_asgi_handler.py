"""Django's middleware chain runs in one thread per request (support/web/asgi_handler.py).

Built for ASGI in async mode, Django's own middleware hops between the event loop and a thread for each
process_request and process_response; the desk's handler builds the chain sync and crosses once. Counted here as
calls of asgiref's SyncToAsync (each one a hand-off to a thread) for one request through the site's ASGI
application, and checked that the request, its middleware and its view ran in one thread, the one the
response is closed in (so request_finished gives the database connection back where it was taken). If an
upgrade of Django changes how its ASGI handler calls get_response_async, these fail.
"""

from __future__ import annotations

import threading

import pytest
from asgiref.sync import SyncToAsync, async_to_sync
from channels.testing import HttpCommunicator
from django.core import signals

from agentsite.asgi import django_asgi_app
from support.web.asgi_handler import SyncChainASGIHandler

pytestmark = pytest.mark.django_db(transaction=True)


def _get(path: str, monkeypatch) -> tuple[dict, int]:
    calls = []
    original = SyncToAsync.__call__

    def counted(self, *args, **kwargs):
        calls.append(getattr(self.func, "__qualname__", repr(self.func)))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counted)

    async def go():
        communicator = HttpCommunicator(django_asgi_app, "GET", path, headers=[(b"host", b"127.0.0.1")])
        response = await communicator.get_response(timeout=10)
        await communicator.wait(timeout=10)  # the handler closes the response after sending it
        return response

    return async_to_sync(go)(), calls


def test_the_site_serves_http_with_the_one_thread_handler():
    handler = getattr(django_asgi_app, "application", django_asgi_app)  # under the static files handler in DEBUG
    assert isinstance(handler, SyncChainASGIHandler)


def test_a_request_crosses_into_a_thread_once_for_its_middleware_and_view(monkeypatch):
    response, calls = _get("/accounts/login/", monkeypatch)
    assert response["status"] == 200 and b"<form" in response["body"]
    # the request's signal (request_started), the chain with its view, and the response's close; Django's
    # async chain made 20 for this page
    assert len(calls) <= 3, calls
    assert sum("get_response" in c for c in calls) == 1, calls


def test_middleware_view_and_the_responses_close_share_one_thread(monkeypatch):
    threads = {}

    def finished(**kwargs):
        threads["finished"] = threading.get_ident()

    import support.web.middleware as middleware

    original = middleware.ProfileOnceMiddleware.__call__

    def in_chain(self, request):
        threads["chain"] = threading.get_ident()
        return original(self, request)

    monkeypatch.setattr(middleware.ProfileOnceMiddleware, "__call__", in_chain)
    signals.request_finished.connect(finished, dispatch_uid="test_asgi_handler")
    try:
        response, _ = _get("/accounts/login/", monkeypatch)
    finally:
        signals.request_finished.disconnect(dispatch_uid="test_asgi_handler")
    assert response["status"] == 200
    assert threads["chain"] == threads["finished"] != threading.get_ident()
