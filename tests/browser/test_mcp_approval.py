"""A gated tool from an MCP server, across two browsers: a customer asks for store credit in the widget, the
console's approval card names the warranty service and the tool with the amount and the order, and the
decision reaches the demo warranty service (standin/warranty) once when approved, never when rejected.
Screenshots of the card at 1280 and 390 px go to tests/artifacts/."""

from playwright.sync_api import expect

from support.models import Approval
from tests.browser.conftest import ARTIFACTS, STAFF_NAME, agent_messages, api_conversation, ask, open_widget
from tests.browser.test_approval_cards import snap

CREDIT_REQUEST = ("The stovetop kettle from order SU-41210 has stopped heating evenly. Could I have 38.00 EUR "
                  "store credit instead of sending it back?")


def asks_for_store_credit(customer_page, staff_page, on_conversation_page: bool):
    """The customer asks while staff watch the queue (or the conversation's page); returns (customer page,
    staff page, conversation id, the card once it is pending)."""
    customer = customer_page()
    conversation = api_conversation(customer)["id"]  # staff watch before the customer writes
    open_widget(customer)
    staff = staff_page(f"/console/conversations/{conversation}/" if on_conversation_page else "/console/approvals/")
    ask(customer, CREDIT_REQUEST)
    banner = customer.get_by_test_id("widget-approval-banner")
    expect(banner).to_contain_text("Our team is reviewing your request", timeout=20000)
    expect(agent_messages(customer)).to_contain_text("asked our team to approve store credit of 38.00 EUR")
    card = staff.get_by_test_id("conversation-approvals").get_by_test_id("approval-card") if on_conversation_page \
        else staff.locator(f'[data-testid="approval-card"]:has(a[href*="{conversation}"])')
    expect(card).to_have_attribute("data-status", "pending", timeout=10000)
    # What is asked, in words, naming the service; the tool's own name in its tooltip; the amount and the order.
    expect(card.get_by_test_id("approval-summary")).to_have_text(
        "Issue store credit of 38.00 EUR on SU-41210 through the warranty service")
    expect(card.get_by_test_id("approval-summary")).to_have_attribute("title", "The agent's call: issue_store_credit")
    expect(card.get_by_test_id("approval-tool")).to_have_count(0)
    expect(card.get_by_test_id("approval-order")).to_contain_text("SU-41210")
    sent = card.get_by_test_id("approval-service-call")
    expect(sent).to_contain_text("Sent to the warranty service when approved")
    expect(sent.locator('[data-arg="amount"]')).to_have_text("Amount38.00 EUR")
    expect(sent.locator('[data-arg="order_number"]')).to_have_text("Order numberSU-41210")
    return customer, staff, conversation, card


def test_store_credit_approved_reaches_the_warranty_service_once(site, customer_page, staff_page,
                                                                 warranty_service):
    before = len(warranty_service.credits)
    customer, staff, conversation, card = asks_for_store_credit(customer_page, staff_page, False)
    assert len(warranty_service.credits) == before  # nothing is sent before a person decides
    snap(staff, "mcp-store-credit-card", ARTIFACTS)
    # What the agent read before asking: the service's own answer, named in words, quoted as text.
    read = card.get_by_test_id("approval-provenance-line")
    expect(read).to_have_text("Read before asking: order SU-41210, the warranty service's answer")
    read.click()
    expect(card.get_by_test_id("provenance-item")).to_contain_text("The warranty service's answer")
    expect(card.get_by_test_id("provenance-text")).to_contain_text("Stovetop kettle, brushed steel: 2-year warranty")

    card.get_by_test_id("approve-button").click()
    expect(card).to_have_attribute("data-status", "approved")
    expect(card.get_by_test_id("approval-decided-by")).to_have_text(STAFF_NAME)
    told = agent_messages(customer).last
    expect(told).to_contain_text("store credit of 38.00 EUR has been added for order SU-41210", timeout=20000)
    expect(customer.get_by_test_id("widget-approval-banner")).to_be_hidden()
    snap(customer, "mcp-store-credit-customer-told", ARTIFACTS)
    snap(staff, "mcp-store-credit-card-approved", ARTIFACTS)

    sent = warranty_service.credits[before:]
    assert [(c["order_number"], c["amount"]) for c in sent] == [("SU-41210", "38.00")]
    approval = Approval.objects.get(run__conversation__public_id=conversation)
    assert (approval.decision, approval.tool_call.name) == (Approval.APPROVED, "issue_store_credit")


def test_store_credit_rejected_never_reaches_the_service_and_the_reason_is_relayed(site, customer_page, staff_page,
                                                                                   warranty_service):
    before = len(warranty_service.credits)
    customer, staff, conversation, card = asks_for_store_credit(customer_page, staff_page, True)
    reason = "a faulty kettle goes back to our warehouse first; the free return label is on its way"
    card.get_by_test_id("reject-button").click()
    card.get_by_test_id("reason-input").fill(reason)
    snap(staff, "mcp-store-credit-card-rejecting", ARTIFACTS)
    card.get_by_test_id("reject-confirm-button").click()
    expect(card).to_have_attribute("data-status", "rejected")
    expect(card.get_by_test_id("approval-reason")).to_have_text(reason)

    told = agent_messages(customer).last
    expect(told).to_contain_text(f"decided against it: {reason}.", timeout=20000)
    expect(told).not_to_contain_text("has been added")
    snap(customer, "mcp-store-credit-customer-rejected", ARTIFACTS)
    assert warranty_service.credits[before:] == []
    approval = Approval.objects.get(run__conversation__public_id=conversation)
    assert (approval.decision, approval.reason) == (Approval.REJECTED, reason)
