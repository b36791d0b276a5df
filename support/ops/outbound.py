"""Where the desk may send a request that carries a key, a token or a customer's data: over https, or over
plain http only while DEBUG is on or to a host PLAIN_HTTP_PRIVATE_HOSTS names as one on a private network.

One rule for every remote the desk calls with a secret (a shop's URL, a Shopify store, an MCP server):
http.py and shopify.py refuse to send, the MCP client refuses to connect, and `manage.py check` (and every
command that runs the checks, migrate included) says so at start-up (support/desk/checks.py).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def plain_http_refused(url: str) -> str | None:
    """Why the desk may not send to `url` (None when it may), in words that name its host, never the whole
    URL (it may carry a token)."""
    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme == "https" or settings.DEBUG:
        return None
    if scheme != "http":
        return f"{host or 'the address'} is not an https URL"
    if host not in _private_hosts():
        return (f"{host or 'the address'} is plain http: the desk sends keys and customers' data only over "
                "https (or to a host PLAIN_HTTP_PRIVATE_HOSTS names as one on a private network)")
    if _public_address(host):
        return f"{host} is a public address: PLAIN_HTTP_PRIVATE_HOSTS names hosts on a private network only"
    return None


def require_https(url: str, setting: str) -> None:
    """ImproperlyConfigured naming `setting` when the desk may not send to `url`."""
    if (problem := plain_http_refused(url)) is not None:
        raise ImproperlyConfigured(f"{setting}: {problem}")


def _private_hosts() -> set[str]:
    return {str(h).strip().lower() for h in settings.PLAIN_HTTP_PRIVATE_HOSTS if str(h).strip()}


def _public_address(host: str) -> bool:
    """An IP address that is not private, loopback or link-local; a name is taken at the operator's word."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return not (address.is_private or address.is_loopback or address.is_link_local)
