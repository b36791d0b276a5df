"""A request body that records whether anyone read it: for endpoints that must refuse a caller before reading
what it sent (webhooks authenticate from their headers first)."""

from __future__ import annotations

from django.test import Client


class UnreadBody:
    """A declared body of `size` bytes that is never there: each read is recorded (and answers nothing)."""

    def __init__(self, size: int):
        self.size = size
        self.reads: list[int] = []

    def read(self, size: int = -1) -> bytes:
        self.reads.append(size)
        return b""

    def readline(self, size: int = -1) -> bytes:
        return self.read(size)


def post_unread(path: str, size: int, content_type: str, **headers) -> tuple[int, UnreadBody]:
    """POST `size` bytes that are never sent; (the answer's status, the body, to ask whether it was read)."""
    body = UnreadBody(size)
    response = Client().generic("POST", path, CONTENT_LENGTH=str(size), CONTENT_TYPE=content_type,
                                **{"wsgi.input": body}, **headers)
    return response.status_code, body
