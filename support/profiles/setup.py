"""The first hour with a real shop: the setup checklist the console opens on while a desk on a remote shop
(SHOP_BACKEND http or shopify) has no published profile yet. Each step's state is read from the desk itself;
the console only renders them (docs/connect-a-shop.md).

Connecting the shop runs `check_shop`'s checks (support/shop/conformance.py) on a contract shop, or reads the
test customer and order through the port on Shopify. Each request has its own short timeout and, once the
shop has not answered in time, the rest are not tried: a slow shop answers the page in seconds, never hangs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from support.models import DraftTest, PolicyDocument, ProfileVersion
from support.profiles import selectors
from support.profiles.profile import NEUTRAL, SUNDRY
from support.shop import port, shop
from support.shop.conformance import Check, check_shop

CHECK_TIMEOUT = 5.0  # seconds per request to the shop while the checklist waits
DONE, TODO, FAILED = "done", "todo", "failed"


@dataclass(frozen=True)
class Step:
    key: str  # connect, policies, profile, test, live
    title: str
    state: str  # done, todo or failed
    detail: str  # what it means now, in plain words


def needed() -> bool:
    """Whether the console opens on the checklist: a remote shop and no profile published yet."""
    return selectors.being_set_up()  # the widget's setup gate reads the same rule


def shop_checks(*, email: str, order_number: str) -> list[Check]:
    """Is the shop connected? check_shop's checks (read only) on a contract shop; on Shopify, the customer and
    the order read through the port."""
    if settings.SHOP_BACKEND == "shopify":
        return _shopify_checks(email, order_number)
    if not settings.SHOP_URL or not settings.SHOP_API_KEY:
        return [Check("the desk knows the shop's address and key", False,
                      "SHOP_URL and SHOP_API_KEY are not both set: set them in the environment and start again")]
    return check_shop(url=settings.SHOP_URL, key=settings.SHOP_API_KEY, email=email, order_number=order_number,
                      timeout=CHECK_TIMEOUT, stop_on_timeout=True)


def _shopify_checks(email: str, order_number: str) -> list[Check]:
    the_shop = shop()
    customer = _port_check(f"the customer {email} is found", lambda: the_shop.customer_by_email(email))
    order = _port_check(f"the order {order_number} is found", lambda: the_shop.order(order_number))
    return [customer, order]


def _port_check(name: str, read) -> Check:
    try:
        found = read()
    except port.ShopUnavailable as e:
        return Check(name, False, f"the shop could not be reached or answered something the desk could not read "
                                  f"({e})")
    return Check(name, True) if found is not None else Check(name, False, "the shop answered that there is none")


def draft_tested() -> bool:
    """Whether a test of the current draft, as it is now (its revision), has finished ("Test this draft",
    support/trials: an edit since then needs a new test)."""
    draft = selectors.draft()
    return draft is not None and DraftTest.objects.filter(draft=draft, draft_revision=draft.revision,
                                                          state=DraftTest.FINISHED).exists()


def steps(*, checks: list[Check] | None) -> list[Step]:
    """The checklist in order. `checks`: the last connection checks run from the checklist (None: not yet)."""
    return [_connect(checks), _policies(), _named(), _tested(), _live()]


def _connect(checks: list[Check] | None) -> Step:
    title = "Connect the shop"
    if not checks:
        return Step("connect", title, TODO, "Run the checks with a test customer's e-mail and one of their orders.")
    failed = sum(not c.ok for c in checks)
    if failed:
        return Step("connect", title, FAILED, f"{failed} of {len(checks)} checks failed; see each one below.")
    return Step("connect", title, DONE, f"All {len(checks)} checks passed.")


def _policies() -> Step:
    count = PolicyDocument.objects.count()
    if count:
        return Step("policies", "Import the policies", DONE, f"{count} polic{'y' if count == 1 else 'ies'} kept.")
    return Step("policies", "Import the policies", TODO, "The agent has no policy to read yet.")


def _named() -> Step:
    title = "Name the agent and set its limits"
    named = [v.data for v in (selectors.draft(), _live_row()) if v is not None and _names_a_shop(v.data)]
    if named:
        return Step("profile", title, DONE, f"The agent works for {named[0]['shop_name']}.")
    return Step("profile", title, TODO, "Give the shop's and the agent's names, the voice and the limits.")


def _live_row() -> ProfileVersion | None:
    live_id = selectors.live_version_id()
    return ProfileVersion.objects.filter(pk=live_id).first() if live_id is not None else None


def _names_a_shop(data: dict) -> bool:
    name = str((data or {}).get("shop_name") or "").strip()
    # the built-in names (the demo's, the neutral one before go-live) are no shop's choice
    return bool(name) and name not in (SUNDRY.shop_name, NEUTRAL.shop_name)


def _tested() -> Step:
    if draft_tested():
        return Step("test", "Test the draft", DONE, "A test of the draft has finished.")
    return Step("test", "Test the draft", TODO, "Run the evaluation on the draft before customers meet it.")


def _live() -> Step:
    if selectors.gone_live():
        return Step("live", "Go live", DONE, "A version is published: the widget answers customers.")
    return Step("live", "Go live", TODO, "Publish the draft. Until then the widget says support is being set up.")
