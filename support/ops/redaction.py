"""What a log line or a span may say about a request's URL: the path, without the secrets some paths carry.

An e-mailed conversation link (/c/<token>/), an unsubscribe link, a signed file link (/api/files/<token>) and an
e-mailed decision link (/console/decide/<token>/) and a staff invitation (/console/join/<token>/) each open something for whoever holds them: written into an
access log or a trace, they would open it for whoever reads those. Their token is written as [redacted]."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

REDACTED = "[redacted]"
# The first matching prefix wins: /c/unsubscribe/<token>/ before /c/<token>/.
_SECRET_PATH = re.compile(r"^(/c/unsubscribe/|/c/|/api/files/|/console/decide/|/console/join/)[^/?#]+")


def redacted_path(path: str) -> str:
    """The path (a query after it kept), its token replaced."""
    return _SECRET_PATH.sub(lambda m: m.group(1) + REDACTED, path, count=1)


def redacted_url(url: str) -> str:
    """A whole URL (scheme, host, path, query) with its path's token replaced."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=redacted_path(parts.path)))


def redacted_args(args):
    """A log record's arguments with every path among them redacted (Django's "Not Found: /c/<token>/")."""
    if isinstance(args, tuple):
        return tuple(redacted_path(a) if isinstance(a, str) and a.startswith("/") else a for a in args)
    return args
