"""Which pages may open the desk's websockets: the socket's own origin (scheme, host and port, from its
Host header and one of ALLOWED_HOSTS), CSRF_TRUSTED_ORIGINS, and for the widget WIDGET_ALLOWED_ORIGINS.

Who may connect: the desk's own pages; the configured shops (widget socket only). Not: another port or
scheme on the desk's host, a shop on another port, a name that is not one of ALLOWED_HOSTS, no Origin.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import WebsocketCommunicator

from agentsite.asgi import application
from support.web.origins import normalise_origin, origin_allowed

WIDGET = "/ws/conversations/00000000-0000-4000-8000-000000000000/"
STAFF = "/ws/staff/"
NOT_STAFF = 4403  # the staff consumer's answer to an anonymous socket: the origin check let it through


def scope(origin: str | None, host: str | None = "localhost:8000", scheme: str = "ws", **headers) -> dict:
    pairs = [(b"origin", origin), (b"host", host), *((k.replace("_", "-").encode(), v) for k, v in headers.items())]
    return {"type": "websocket", "scheme": scheme,
            "headers": [(k, v.encode("latin1")) for k, v in pairs if v is not None]}


def handshake(path: str, origin: str, host: str = "localhost:8000"):
    """(accepted, close code) of a websocket handshake through the real router."""
    async def go():
        ws = WebsocketCommunicator(application, path, headers=scope(origin, host)["headers"])
        connected, code = await ws.connect(timeout=3)
        if connected:
            await ws.disconnect()
        return connected, code

    return asyncio.run(go())


# -- origins, compared whole -------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, origin", [
    ("http://localhost:8000", "http://localhost:8000"),
    ("HTTPS://Shop.Example:443", "https://shop.example"),
    ("http://shop.example:80/", "http://shop.example"),
    ("https://shop.example:80", "https://shop.example:80"),
    ("http://[::1]:8000", "http://[::1]:8000"),
])
def test_an_origin_is_scheme_host_and_port_with_the_default_port_left_out(raw, origin):
    assert normalise_origin(raw) == origin


@pytest.mark.parametrize("raw", ["null", "", "localhost:8000", "shop.example", "ftp://shop.example",
                                 "https://shop.example/path", "https://user@shop.example",
                                 "https://shop.example:99999", "https://shop.example?x=1", None])
def test_anything_else_is_not_an_origin(raw):
    assert normalise_origin(raw) is None


def test_a_page_on_another_port_of_the_desks_host_is_not_the_desk():
    assert origin_allowed(scope("http://localhost:8000"), [])
    assert not origin_allowed(scope("http://localhost:9999"), [])
    assert not origin_allowed(scope("http://localhost"), [])


def test_a_page_on_another_scheme_of_the_desks_host_is_not_the_desk():
    assert not origin_allowed(scope("https://localhost:8000"), [])
    assert origin_allowed(scope("https://localhost:8000", scheme="wss"), [])
    assert not origin_allowed(scope("http://localhost:8000", scheme="wss"), [])


def test_a_default_port_written_out_is_the_same_origin(settings):
    settings.ALLOWED_HOSTS = ["desk.example"]
    assert origin_allowed(scope("https://desk.example", host="desk.example:443", scheme="wss"), [])
    assert origin_allowed(scope("http://desk.example:80", host="desk.example"), [])
    assert origin_allowed(scope("https://shop.example", host="desk.example"), ["https://shop.example:443"])


def test_behind_a_tls_proxy_the_desk_is_https_only_when_the_configured_header_says_so(settings):
    settings.ALLOWED_HOSTS = ["desk.example"]
    forwarded = scope("https://desk.example", host="desk.example", x_forwarded_proto="https")
    assert not origin_allowed(forwarded, [])  # no proxy header configured: a client's header proves nothing
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert origin_allowed(forwarded, [])
    assert not origin_allowed(scope("http://desk.example", host="desk.example", x_forwarded_proto="https"), [])
    assert not origin_allowed(scope("https://desk.example", host="desk.example", x_forwarded_proto="http"), [])


def test_a_host_that_is_not_one_of_allowed_hosts_gives_no_own_origin(settings):
    # A page on a name rebound to the desk's address would otherwise be "same origin" with itself.
    settings.ALLOWED_HOSTS = ["desk.example"]
    assert not origin_allowed(scope("http://rebound.attacker.test", host="rebound.attacker.test"), [])
    assert not origin_allowed(scope("http://desk.example", host=None), [])


def test_a_listed_origin_matches_only_on_its_own_scheme_and_port():
    listed = ["https://shop.example"]
    assert origin_allowed(scope("https://shop.example"), listed)
    assert not origin_allowed(scope("https://shop.example:8443"), listed)
    assert not origin_allowed(scope("http://shop.example"), listed)
    assert not origin_allowed(scope("https://www.shop.example"), listed)


@pytest.mark.parametrize("origin", [None, "null", "http://localhost:8000/page"])
def test_no_origin_or_a_malformed_one_is_refused(origin):
    assert not origin_allowed(scope(origin), ["*", "null"])


# -- through the router: the widget and the staff sockets ----------------------------------------------------

def test_the_widget_socket_accepts_the_desks_own_pages_and_the_listed_shops(settings):
    settings.WIDGET_ALLOWED_ORIGINS = ["https://shop.example"]
    assert handshake(WIDGET, "http://localhost:8000")[0] is True
    assert handshake(WIDGET, "https://shop.example")[0] is True


@pytest.mark.parametrize("origin", ["http://localhost:9999", "https://shop.example:8443", "http://evil.example"])
def test_the_widget_socket_refuses_other_ports_and_other_sites(settings, origin):
    settings.WIDGET_ALLOWED_ORIGINS = ["https://shop.example"]
    assert handshake(WIDGET, origin)[0] is False


def test_the_staff_socket_refuses_another_port_of_its_host_before_looking_at_the_session():
    assert handshake(STAFF, "http://localhost:8000") == (False, NOT_STAFF)
    connected, code = handshake(STAFF, "http://localhost:9999")
    assert connected is False and code != NOT_STAFF


def test_the_staff_socket_accepts_csrf_trusted_origins_but_not_the_shops(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://desk.example"]
    settings.WIDGET_ALLOWED_ORIGINS = ["https://shop.example"]
    assert handshake(STAFF, "https://desk.example") == (False, NOT_STAFF)
    assert handshake(STAFF, "https://shop.example")[1] != NOT_STAFF
