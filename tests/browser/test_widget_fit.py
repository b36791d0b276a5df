"""A widget that fits the shop: docked beside the page at 1280 px (the shop's orders stay fully in view), a
full-screen sheet with a clear way back at 390 px (the back control, Escape and the browser's back button),
the launcher clear of the SU-41207 badge, the side and colours from the script tag (anything that is not a
colour ignored), and the team's hours and reply time shown, in the customer's own time.

Screenshots: var/screenshots/widget-fit-*.png (1280 and 390 px wide).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from playwright.sync_api import expect

from tests.browser.conftest import open_widget
from tests.browser.inbox_helpers import SCREENSHOTS

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def snap(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"widget-fit-{name}.png"))


def settle(page) -> None:
    """Until the panel's opening animation is over: it is measured where it rests."""
    page.evaluate("""() => Promise.all(document.querySelector('[data-testid="widget-host"]').shadowRoot
        .getAnimations().map((a) => a.finished))""")


def widget(page, testid: str):
    return page.get_by_test_id(testid)


def box(locator) -> dict:
    return locator.bounding_box()


def overlap(a: dict, b: dict) -> bool:
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])


def badge(page, number: str = "SU-41207"):
    return page.locator(f'[data-testid="shop-order"][data-order="{number}"] .badge')


def test_at_1280_the_open_widget_docks_beside_the_shop_and_its_orders_stay_in_view(customer_page):
    page = customer_page(viewport=DESKTOP)
    orders = page.get_by_test_id("shop-orders")
    expect(orders).to_be_visible()
    launcher = widget(page, "widget-button")
    expect(launcher).to_be_visible()
    assert not overlap(box(launcher), box(badge(page)))  # the launcher never hides the order the README names
    for label in page.locator('[data-testid="shop-order"] :is(.order-number, .badge)').all():  # nor any order's
        assert not overlap(box(launcher), box(label))
    snap(page, "closed-1280")

    open_widget(page)
    settle(page)
    panel = widget(page, "widget-panel")
    panel_box, orders_box = box(panel), box(orders)
    assert panel_box["height"] == DESKTOP["height"] and panel_box["x"] + panel_box["width"] == DESKTOP["width"]
    assert not overlap(panel_box, orders_box), (panel_box, orders_box)
    assert orders_box["x"] >= 0 and orders_box["x"] + orders_box["width"] <= panel_box["x"]  # wholly beside it
    for order in page.get_by_test_id("shop-order").all():  # every order's number and badge, not just the box
        order_box = box(order)
        assert order_box["x"] + order_box["width"] <= panel_box["x"]
    assert page.evaluate("() => document.documentElement.scrollWidth") <= DESKTOP["width"]  # no sideways scroll
    expect(launcher).to_be_hidden()  # the panel's own close button closes it
    snap(page, "docked-1280")

    widget(page, "widget-close").click()
    expect(panel).to_be_hidden()
    assert page.evaluate("() => document.documentElement.style.marginRight") == ""  # the page has its width back


def test_at_390_the_widget_is_a_full_screen_sheet_with_a_way_back(customer_page, site):
    page = customer_page(viewport=PHONE, is_mobile=True, has_touch=True)
    launcher = widget(page, "widget-button")
    su = badge(page)
    su.scroll_into_view_if_needed()
    assert not overlap(box(launcher), box(su))
    for each in page.locator('[data-testid="shop-order"] .badge').all():  # no badge sits where the launcher floats
        assert box(each)["x"] + box(each)["width"] < box(launcher)["x"]
    snap(page, "closed-390")

    open_widget(page)
    settle(page)
    panel = widget(page, "widget-panel")
    assert box(panel) == {"x": 0, "y": 0, "width": PHONE["width"], "height": PHONE["height"]}
    back = widget(page, "widget-close")
    expect(back).to_be_visible()
    expect(back).to_have_text("Back to shop")
    expect(back).to_have_accessible_name("Back to shop")
    snap(page, "sheet-390")

    page.go_back()  # the phone's back button closes the sheet and stays on the shop
    expect(panel).to_be_hidden()
    assert page.url.rstrip("/") == site.rstrip("/")
    expect(page.get_by_test_id("shop-orders")).to_be_visible()

    launcher.click()
    expect(panel).to_be_visible()
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()

    launcher.click()
    back.click()
    expect(panel).to_be_hidden()
    page.wait_for_function("() => history.state === null")  # the back control took its history entry with it,
    assert page.url.rstrip("/") == site.rstrip("/")  # so the browser's back button leaves as without the widget


def test_the_shop_sets_side_and_colours_and_text_on_the_accent_stays_readable(customer_page, site):
    page = customer_page(viewport=DESKTOP)
    page.goto(site + "/?position=left&accent=%23ffcc00")
    launcher = widget(page, "widget-button")
    expect(launcher).to_have_css("background-color", "rgb(255, 204, 0)")
    expect(launcher).to_have_css("color", "rgb(29, 35, 48)")  # dark text on yellow: white would not read
    assert box(launcher)["x"] < 40
    open_widget(page)
    settle(page)
    assert box(widget(page, "widget-panel"))["x"] == 0
    chip = page.get_by_test_id("widget-suggestion").first  # the accent as text on white: darkened until it reads
    assert page.evaluate("(el) => getComputedStyle(el).color", chip.element_handle()) not in ("rgb(255, 204, 0)",)
    assert page.evaluate("() => document.documentElement.style.marginLeft") == "400px"
    snap(page, "left-yellow-1280")


def test_anything_that_is_not_a_colour_is_ignored(customer_page, site):
    page = customer_page(viewport=DESKTOP)
    page.goto(site + "/?accent=red;background:url(https://attacker.test/)&position=top")
    launcher = widget(page, "widget-button")
    expect(launcher).to_have_css("background-color", "rgb(15, 93, 87)")  # the default
    assert box(launcher)["x"] > DESKTOP["width"] - 300  # an unknown side: the right


def test_the_overlay_layout_floats_over_the_page_without_moving_it(customer_page, site):
    page = customer_page(viewport=DESKTOP)
    page.goto(site + "/?layout=overlay")
    open_widget(page)
    settle(page)
    panel_box = box(widget(page, "widget-panel"))
    assert panel_box["height"] < DESKTOP["height"] - 50  # the floating panel, not a full-height dock
    assert page.evaluate("() => document.documentElement.style.marginRight") == ""


def test_the_team_hours_and_reply_time_are_shown_in_the_customers_own_time(customer_page):
    # Sunday 12:00 in London: the team (Mon-Fri 08:00-20:00, Sat 09:00-17:00, London) is away until
    # Monday 08:00 London, which is 09:00 for a customer in Berlin.
    def before(page):
        page.clock.set_fixed_time(datetime(2026, 3, 8, 12, 0, tzinfo=timezone.utc))

    page = customer_page(viewport=DESKTOP, timezone_id="Europe/Berlin", before=before)
    open_widget(page)
    hours = widget(page, "widget-hours")
    expect(hours).to_be_visible()
    expect(hours).to_have_attribute("data-open", "false")
    expect(hours).to_contain_text("Our team is away · back Mon 09:00")
    expect(hours).to_contain_text("Hours: Mon–Fri 08:00–20:00, Sat 09:00–17:00 (London time)")
    snap(page, "hours-away-1280")


def test_during_hours_the_widget_says_the_team_is_here_and_how_soon_it_replies(customer_page):
    def before(page):
        page.clock.set_fixed_time(datetime(2026, 3, 10, 11, 0, tzinfo=timezone.utc))  # a Tuesday, 11:00 London

    page = customer_page(viewport=PHONE, before=before)
    open_widget(page)
    hours = widget(page, "widget-hours")
    expect(hours).to_have_attribute("data-open", "true")
    expect(hours).to_contain_text(re.compile(r"Our team is here now · replies within 4 hours"))
    snap(page, "hours-open-390")
