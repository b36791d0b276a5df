"""The approval card shows the version of each policy the agent read ("POL-REFUND v1"), as search_policy
returned it, so a decision can be traced to the words it rested on (docs/policies.md)."""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import expect

from support.models import PolicyDocument
from tests.browser.conftest import (
    ask,
    open_widget,
    refundable_again,
    widget_conversation,
)


def test_the_card_shows_the_version_of_each_policy_the_agent_read(site, customer_page, staff_page, model_settings):
    refundable_again("SU-41290")
    staff = staff_page("/console/approvals/")
    customer = customer_page()
    open_widget(customer)
    ask(customer, f"Can I have the rest of my money back for SU-41290? (ref {uuid.uuid4().hex[:8]})")
    conversation = widget_conversation(customer)["id"]
    card = staff.locator(f'[data-testid="approval-card"]:has(a[href*="{conversation}"])')
    expect(card).to_have_attribute("data-status", "pending", timeout=20000)
    card.get_by_test_id("approval-policies").locator(":scope > summary").click()
    version = PolicyDocument.objects.get(doc_id="POL-REFUND").version
    expect(card.locator('[data-doc="POL-REFUND"]').get_by_test_id("approval-policy-version")).to_have_text(
        re.compile(rf"^\s*v{version}$"))
