"""Django's ASGI handler with the middleware chain run as under WSGI: in one thread per request.

Django builds the chain for ASGI in async mode whenever the middleware allows it, and its own middleware
(MiddlewareMixin) then runs each process_request and process_response through sync_to_async: for one page of
the desk that is 20 hand-offs between the event loop and a thread, the view's own included (every view of the
desk is sync). Here the chain is built sync and the request crosses once, into the thread Django keeps for it
(thread-sensitive, inside the request's ThreadSensitiveContext): the thread Django's handler later closes the
response in, so request_finished gives the database connection back in the thread that took it, as before.

Django keeps ASGIHandler out of its public API (get_asgi_application is the interface). The subclass relies on
two of its methods only, load_middleware and get_response_async, both BaseHandler's; tests/test_asgi_handler.py
counts the crossings (3 for a page: the request's signal, the chain, the response's close) and fails if an
upgrade changes how the handler calls them.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler


class SyncChainASGIHandler(ASGIHandler):
    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)

    async def get_response_async(self, request):
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)


def sync_chain_asgi_application() -> SyncChainASGIHandler:
    """get_asgi_application(), with the handler above."""
    import django

    django.setup(set_prefix=False)
    return SyncChainASGIHandler()
