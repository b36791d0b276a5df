"""MCP_SERVERS: the tool servers the agent may use besides the shop, read and checked at start-up.

A JSON list, one object per server:
  {"name": "warranty", "url": "https://warranty.example/mcp", "headers": {"Authorization": "Bearer ..."},
   "timeout": 10, "connect_timeout": 5,
   "tools": {"lookup_warranty": {"kind": "read"},
             "issue_store_credit": {"kind": "gated", "amount": "amount", "order": "order_number",
                                    "fingerprint": "sha256:<64 hex digits>"}}}
Only the tools named under "tools" are offered to the agent. "read" tools run at once; "gated" tools wait for
a person's approval. "amount" and "order" name the arguments the desk checks before a person is asked (the
order is the customer's, the amount within REFUND_CEILING). "fingerprint" (optional) is the tool's description
and input schema as approved (`manage.py check --tag mcp` says it): a tool that no longer matches is not
offered. Every mistake is refused here, naming MCP_SERVERS, so a bad value stops the start instead of a run;
so are two tools that would be offered under one name.
"""

from __future__ import annotations

import json
import os
import re

from django.core.exceptions import ImproperlyConfigured

NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,29}")  # a server: short, and part of a tool name the model reads
TOOL = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what OpenAI-compatible endpoints accept as a function name
KINDS = ("read", "gated")
SERVER_KEYS = {"name", "url", "headers", "timeout", "connect_timeout", "tools"}
TOOL_KEYS = {"kind", "amount", "order", "fingerprint"}
FINGERPRINT = re.compile(r"sha256:[0-9a-f]{64}")
DEFAULT_TIMEOUT = 10.0
MAX_TIMEOUT = 120.0


def env_mcp_servers(name: str = "MCP_SERVERS") -> list[dict]:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise ImproperlyConfigured(f"{name} must be a JSON list of servers: {e}") from None
    return parse_servers(value, name)


def parse_servers(value, name: str = "MCP_SERVERS") -> list[dict]:
    """The servers as the desk uses them (every key present), or ImproperlyConfigured naming what is wrong."""
    if not isinstance(value, list):
        raise ImproperlyConfigured(f"{name} must be a JSON list of servers, got {type(value).__name__}")
    servers, seen = [], set()
    for i, entry in enumerate(value):
        server = _server(entry, f"{name}[{i}]")
        if server["name"] in seen:
            raise ImproperlyConfigured(f"{name}: two servers are called {server['name']!r}")
        seen.add(server["name"])
        servers.append(server)
    _one_tool_a_name(servers, name)
    return servers


def _one_tool_a_name(servers: list[dict], name: str) -> None:
    """A tool is offered under its own name, or as `<server>__<tool>` when its name is taken (by another server's
    tool, or one of the desk's: support/tools/mcp.py). Refused: a tool's own name that is another's
    `<server>__<tool>`, or two with one `<server>__<tool>`; the model could not tell them apart."""
    prefixed: dict[str, tuple[str, str]] = {}
    for server in servers:
        for tool in server["tools"]:
            offered = f"{server['name']}__{tool}"
            if offered in prefixed:
                _two_as_one(name, offered, (server["name"], tool), prefixed[offered])
            prefixed[offered] = (server["name"], tool)
    for server in servers:
        for tool in server["tools"]:
            if tool in prefixed:
                _two_as_one(name, tool, (server["name"], tool), prefixed[tool])


def _two_as_one(name: str, offered: str, one: tuple[str, str], other: tuple[str, str]) -> None:
    raise ImproperlyConfigured(f"{name}: two tools would be offered as {offered!r}: {one[1]} of {one[0]} and "
                               f"{other[1]} of {other[0]}; rename one")


def _server(entry, where: str) -> dict:
    _object(entry, SERVER_KEYS, where, "an object with name, url and tools")
    server_name = entry.get("name")
    if not isinstance(server_name, str) or not NAME.fullmatch(server_name):
        raise ImproperlyConfigured(f"{where}.name must be lower-case letters, digits, _ or - (at most 30), "
                                   f"got {server_name!r}")
    where = f"{where} ({server_name})"
    url = entry.get("url")
    if not isinstance(url, str) or not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
        raise ImproperlyConfigured(f"{where}.url must be an http(s) URL")  # not echoed: it may hold a token
    headers = entry.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise ImproperlyConfigured(f"{where}.headers must be an object of strings")  # values never echoed
    timeout = _seconds(entry.get("timeout", DEFAULT_TIMEOUT), f"{where}.timeout")
    connect = _seconds(entry.get("connect_timeout", min(timeout, 5.0)), f"{where}.connect_timeout")
    tools = entry.get("tools")
    if not isinstance(tools, dict) or not tools:
        raise ImproperlyConfigured(f"{where}.tools must name at least one tool, e.g. "
                                   '{"lookup_warranty": {"kind": "read"}}')
    return {"name": server_name, "url": url, "headers": dict(headers), "timeout": timeout,
            "connect_timeout": connect,
            "tools": {tool: _tool(spec, tool, f"{where}.tools.{tool}") for tool, spec in tools.items()}}


def _tool(spec, tool: str, where: str) -> dict:
    if not TOOL.fullmatch(tool):
        raise ImproperlyConfigured(f"{where}: a tool name is letters, digits, _ or - (at most 64)")
    _object(spec, TOOL_KEYS, where, 'an object like {"kind": "read"}')
    kind = spec.get("kind")
    if kind not in KINDS:
        raise ImproperlyConfigured(f'{where}.kind must be "read" or "gated", got {kind!r}')
    fingerprint = spec.get("fingerprint")
    if fingerprint is not None and not (isinstance(fingerprint, str) and FINGERPRINT.fullmatch(fingerprint)):
        raise ImproperlyConfigured(f'{where}.fingerprint must be "sha256:" and 64 hex digits, as manage.py check '
                                   "--tag mcp says it")
    fields = {}
    for key in ("amount", "order"):
        field = spec.get(key)
        if field is None:
            continue
        if kind != "gated":
            raise ImproperlyConfigured(f"{where}.{key}: only a gated tool has its {key} checked")
        if not isinstance(field, str) or not TOOL.fullmatch(field):
            raise ImproperlyConfigured(f"{where}.{key} must name one of the tool's arguments, got {field!r}")
        fields[key] = field
    return {"kind": kind, "amount": fields.get("amount"), "order": fields.get("order"), "fingerprint": fingerprint}


def _object(value, keys: set[str], where: str, like: str) -> None:
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{where} must be {like}")
    unknown = set(value) - keys
    if unknown:
        raise ImproperlyConfigured(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")


def _seconds(raw, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 < raw <= MAX_TIMEOUT:
        raise ImproperlyConfigured(f"{where} must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}, "
                                   f"got {raw!r}")
    return float(raw)
