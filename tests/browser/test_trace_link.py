"""A run that was traced shows its trace id on the conversation page, linked to the operator's trace viewer
(TRACE_URL); a run that was not shows nothing of it."""

from playwright.sync_api import expect

from support.models import Run
from tests.browser.conftest import agent_messages, api_conversation, ask, open_widget, shot

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_a_traced_run_links_to_its_trace_and_an_untraced_one_shows_none(site, customer_page, staff_page):
    customer = customer_page()
    conversation = api_conversation(customer)["id"]
    open_widget(customer)
    ask(customer, "Where is my order SU-41620?")
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)
    run = Run.objects.filter(conversation__public_id=conversation).latest("created_at")

    staff = staff_page(f"/console/conversations/{conversation}/")
    staff.get_by_test_id("tab-run-details").click()
    expect(staff.get_by_test_id("run-status")).to_have_attribute("data-status", "stopped", timeout=15000)
    expect(staff.get_by_test_id("run-trace")).to_have_count(0)  # not traced: no row

    Run.objects.filter(pk=run.pk).update(trace_parent=f"00-{TRACE}-00f067aa0ba902b7-01")
    staff.reload()  # the tab is kept across a reload (#run-details)
    row = staff.get_by_test_id("run-trace")
    link = row.get_by_role("link", name=f"Open in the trace viewer {TRACE}")
    expect(link).to_have_attribute("href", f"http://traces.example:16686/trace/{TRACE}")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    show = "document.querySelector('[data-testid=run-trace]').scrollIntoView({block: 'center'})"  # re-rendered live
    staff.evaluate(show)
    shot(staff, "trace-link")
    staff.set_viewport_size({"width": 390, "height": 844})
    expect(row).to_be_visible()
    staff.evaluate(show)
    shot(staff, "trace-link-390")
