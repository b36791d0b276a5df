"""Start-up checks: configuration the desk cannot run correctly with, said before the first run fails."""

import os
import sys

from django.conf import settings
from django.core import checks

from support.desk.assistant import model_price_problem
from support.ops.outbound import plain_http_refused
from support.shop.shopify import origin as shopify_origin
from support.tools import mcp


@checks.register()
def model_is_priced(app_configs, **kwargs):
    problem = model_price_problem()
    if not problem:
        return []
    return [checks.Error(f"Runs will be refused: {problem}.", id="support.E001")]


def _asked_for() -> bool:
    """Whether a person ran `manage.py check`. migrate, runserver and others run the checks too; they must not
    wait on a server that is down, nor fail because a server dropped a tool (the agent is simply not offered
    it). Django tells a check nothing about the command that runs it, hence the command line."""
    return len(sys.argv) > 1 and os.path.basename(sys.argv[0]) in ("manage.py", "django-admin") \
        and sys.argv[1] == "check"


@checks.register("mcp")
def mcp_tools_exist(app_configs, **kwargs):
    """Every tool MCP_SERVERS lists is one its server has. A server that does not answer now is a warning:
    it may be down for a moment, and its tools are offered again once it answers. The servers are asked only
    by `manage.py check` (every check, or `--tag mcp`), or when called directly."""
    if not settings.MCP_SERVERS or not (kwargs.get("asked") or _asked_for()):
        return []
    missing, silent = mcp.missing_tools()
    found = [checks.Error(f"MCP_SERVERS lists {m}, which the server does not have; it is not offered to the agent.",
                          id="support.E002") for m in missing]
    found += [checks.Warning(f"MCP_SERVERS: the {name} server did not answer; its tools are not offered until it does.",
                             id="support.W002") for name in silent]
    refused, unpinned = mcp.refused_tools()
    found += [checks.Error(f"MCP_SERVERS lists {r}; it is not offered to the agent.", id="support.E003")
              for r in refused]
    found += [checks.Warning(f'MCP_SERVERS lists {tool} without a fingerprint: add "fingerprint": "{pin}" to offer it '
                             "only while its description and input schema stay as you reviewed them.",
                             id="support.W004") for tool, pin in unpinned]
    return found


SLACK_SETTINGS = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APPROVALS_CHANNEL")


@checks.register()
def slack_is_set_up_whole(app_configs, **kwargs):
    """Approvals in Slack need all three settings; some of them alone is a mistake, said before anyone waits for
    a message that never comes."""
    unset = [name for name in SLACK_SETTINGS if not getattr(settings, name)]
    if not unset or len(unset) == len(SLACK_SETTINGS):
        return []
    return [checks.Warning(f"Approvals are not posted to Slack: {' and '.join(unset)} not set.", id="support.W003")]


def _remote_urls() -> list[tuple[str, str]]:
    """(setting, URL) for each remote the desk sends a key, a token or customers' data to."""
    urls = []
    if settings.SHOP_BACKEND == "http" and settings.SHOP_URL:
        urls.append(("SHOP_URL", settings.SHOP_URL))
    if settings.SHOP_BACKEND == "shopify" and settings.SHOPIFY_SHOP_DOMAIN:
        urls.append(("SHOPIFY_SHOP_DOMAIN", shopify_origin()))
    urls += [(f"MCP_SERVERS ({server['name']})", server["url"]) for server in settings.MCP_SERVERS]
    return urls


@checks.register()
def remotes_are_https(app_configs, **kwargs):
    """With DEBUG off every remote is https, or a host PLAIN_HTTP_PRIVATE_HOSTS names: said at start-up, and
    refused again by each client as it sends (support/ops/outbound.py)."""
    return [checks.Error(f"{setting}: {problem}; the desk will not send to it.", id="support.E004")
            for setting, url in _remote_urls() if (problem := plain_http_refused(url)) is not None]


@checks.register()
def shop_contract_is_current(app_configs, **kwargs):
    """Version 1 of the shop contract signs neither the Idempotency-Key nor a nonce: a captured request can be
    replayed for five minutes, with new keys. Allowed while a shop moves to version 2, never quietly."""
    if settings.SHOP_CONTRACT_VERSION != 1:
        return []
    return [checks.Warning("SHOP_CONTRACT_VERSION=1: requests to the shop can be replayed (version 1 signs neither "
                           "the Idempotency-Key nor a nonce); move the shop to version 2 (docs/shop-contract.md).",
                           id="support.W005")]
