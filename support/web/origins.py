"""Which pages may open the desk's websockets: the socket's own origin, or one configured, compared whole.

An origin is scheme, host and port together (RFC 6454): the desk's host on another port is another site
(any local program can serve a page from http://localhost:9999), so nothing here matches a host alone.
A port written out that is the scheme's default is the same origin as none, as browsers send it.
Settings import `normalise_origin` to check configured origins, so this module imports no Django at the top.
"""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise_origin(value) -> str | None:
    """`scheme://host[:port]` as a browser sends it (lower case, default port left out), or None for
    anything that is not an http(s) origin: "null", a path or query, credentials, no host, a bad port."""
    if not isinstance(value, str):
        return None
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:  # a port out of range or not a number
        return None
    if parts.scheme.lower() not in DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc:
        return None
    scheme = parts.scheme.lower()
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname  # IPv6 keeps its brackets
    return f"{scheme}://{host}" + ("" if port in (None, DEFAULT_PORTS[scheme]) else f":{port}")


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin1")
    return None


def _arrived_over_tls(scope) -> bool:
    """wss, or ws from a TLS-terminating proxy that says so in SECURE_PROXY_SSL_HEADER (as Django trusts
    it for requests: only when that proxy sets the header itself, whatever the client sent)."""
    from django.conf import settings

    if scope.get("scheme") in ("wss", "https"):
        return True
    if not settings.SECURE_PROXY_SSL_HEADER:
        return False
    meta_name, secure_value = settings.SECURE_PROXY_SSL_HEADER
    header = meta_name.removeprefix("HTTP_").replace("_", "-").lower().encode("latin1")
    sent = _header(scope, header)
    return sent is not None and sent.split(",", 1)[0].strip() == secure_value


def socket_origin(scope) -> str | None:
    """The origin the socket was opened on: its scheme and its Host header, when that host is one of
    ALLOWED_HOSTS (otherwise a page on a rebound name could call itself our origin). None without a Host."""
    from django.conf import settings
    from django.http.request import split_domain_port, validate_host

    host = _header(scope, b"host")
    if not host:
        return None
    domain, _port = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS or ([".localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else [])
    if not domain or not validate_host(domain, allowed):
        return None
    return normalise_origin(("https" if _arrived_over_tls(scope) else "http") + "://" + host)


def origin_allowed(scope, listed) -> bool:
    """The socket's Origin header names its own origin, or exactly one of `listed`."""
    origin = normalise_origin(_header(scope, b"origin"))
    if origin is None:
        return False
    return origin == socket_origin(scope) or origin in {normalise_origin(o) for o in listed}


class OriginValidator:
    """ASGI middleware for a websocket route: refuses the handshake unless `origin_allowed`, with the
    origins listed in the named settings (read at each connection, so they are never stale)."""

    def __init__(self, application, *setting_names: str):
        self.application, self.setting_names = application, setting_names

    async def __call__(self, scope, receive, send):
        from channels.security.websocket import WebsocketDenier
        from django.conf import settings

        listed = [o for name in self.setting_names for o in getattr(settings, name)]
        if origin_allowed(scope, listed):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
