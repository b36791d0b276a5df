"""A first look: the shop page embeds the widget, which answers a question about SU-41207."""

from playwright.sync_api import expect

from tests.browser.conftest import shot


def test_a_customer_asks_about_su_41207_and_sees_the_streamed_answer(site, page):
    page.goto(site + "/")
    page.get_by_test_id("widget-button").click()
    page.get_by_test_id("widget-input").fill("Tracking says delivered on Thursday but nothing arrived. Order SU-41207")
    page.get_by_test_id("widget-send").click()
    answer = page.locator('[data-testid="widget-message"][data-author="agent"]').last
    expect(answer).to_contain_text("48 hours", timeout=20000)
    shot(page, "widget-su-41207")
