"""What the inbox and notification browser tests share: a second staff login, full-page screenshots at
desktop and phone width into var/screenshots/, and finding a conversation's row."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import expect

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "var" / "screenshots"
WIDTHS = {"1280": (1280, 900), "390": (390, 844)}
ALEX = ("alex", "alex-demo-pw")


def alex_user():
    """A second staff member (a Support agent, first name Alex), created once, or made an agent if the demo
    seeded Alex as a lead."""
    from django.contrib.auth import get_user_model

    from support.desk import permissions

    user, _ = get_user_model().objects.get_or_create(username=ALEX[0], defaults={"first_name": "Alex"})
    user.first_name, user.is_staff, user.is_active = "Alex", True, True
    user.set_password(ALEX[1])
    user.save()
    user.groups.set([permissions.ensure_groups()[permissions.AGENTS]])  # an agent only (the demo seeds a lead Alex)
    return user


def login(new_context, site, path="/console/", username="staff", password="sundry-demo", **context_options):
    """A console page logged in as `username`, in a browser context of its own, live."""
    page = new_context(**context_options).new_page()
    page.goto(site + "/accounts/login/?next=" + path)
    page.locator("input[name=username]").fill(username)
    page.locator("input[name=password]").fill(password)
    page.get_by_test_id("login-button").click()
    page.wait_for_url("**" + path.split("?")[0] + "*")
    expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "live")
    return page


def screens(page, name: str) -> None:
    """Full-page screenshots at 1280 and 390 px wide: var/screenshots/<name>-1280.png and -390.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    before = page.viewport_size
    for label, (width, height) in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(150)
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{label}.png"), full_page=True)
    if before:
        page.set_viewport_size(before)


def page_width(page) -> int:
    return page.evaluate("() => document.documentElement.scrollWidth")


def row(page, conversation: str):
    return page.locator(f'[data-testid="conversation-row"][data-conversation="{conversation}"]')
