"""A support lead writes a policy in the console: begins one, edits it with a preview, saves with a note;
the history names them and the version the agent's next search reads is the new one. Screenshots at 1280x800
and 390x844 go to tests/artifacts/policy-*.png."""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import expect

from support.models import Customer, PolicyDocument
from tests.browser.conftest import STAFF_NAME, shot

DESKTOP, PHONE = {"width": 1280, "height": 800}, {"width": 390, "height": 844}


@pytest.fixture
def gift_card_title(site):
    """A title no other test uses; the policy it names goes after the test, so the demo's policies (and the
    agent's ranking of them in later tests) are as seeded."""
    title = f"Gift cards and store credit {uuid.uuid4().hex[:6]}"
    yield title
    PolicyDocument.objects.filter(title=title).delete()


def both_widths(page, name: str) -> None:
    for size, suffix in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page.set_viewport_size(size)
        page.wait_for_timeout(150)
        assert page.evaluate("() => document.scrollingElement.scrollWidth") <= size["width"] + 1, f"{name} scrolls sideways"
        shot(page, f"{name}-{suffix}")
    page.set_viewport_size(DESKTOP)


def agent_reads(title: str) -> dict:
    """What the agent's search_policy returns for this policy now (the tool itself, on the site's database).
    Each process keeps the policies it read for a few seconds (support/shop/search.py), and a save in the site's
    process sends no signal to this one: this process's copy is forgotten first, as it would be by then."""
    from support.agent.tools import ToolContext
    from support.shop import search
    from support.tools.policies import search_policy

    search.forget_corpora()

    maya = Customer.objects.get(email="maya@example.com")
    ctx = ToolContext(customer_id=maya.pk, conversation_id="c", run_id="r", call_id="k", idempotency_key="r:k")
    (hit,) = [r for r in search_policy(ctx, "gift card store credit refund")["results"] if r["title"] == title]
    return hit


def test_a_lead_writes_a_policy_previews_an_edit_saves_it_and_the_agent_reads_the_new_version(staff_page, gift_card_title):
    page = staff_page("/console/")
    page.set_viewport_size(DESKTOP)
    page.get_by_test_id("nav-policies").click()
    expect(page.get_by_test_id("nav-policies")).to_have_attribute("aria-current", "page")
    expect(page.get_by_test_id("policy-row").first).to_be_visible()
    both_widths(page, "policy-list")

    # A new Sundry-wide policy.
    page.get_by_test_id("policy-new").click()
    page.get_by_test_id("policy-title-input").fill(gift_card_title)
    page.get_by_test_id("policy-body").fill("Gift cards are not refunded in cash. A refund of an order paid with a "
                                            "gift card goes back as store credit.")
    page.get_by_test_id("policy-note").fill("First version, agreed with finance")
    page.get_by_test_id("policy-save").click()
    expect(page.get_by_test_id("policy-saved")).to_contain_text("Saved as version 1")
    doc = PolicyDocument.objects.get(title=gift_card_title)
    assert agent_reads(gift_card_title)["version"] == 1

    # An edit: the preview shows the Markdown formatted and saves nothing.
    page.get_by_test_id("policy-edit").click()
    body = page.get_by_test_id("policy-body")
    body.fill(body.input_value() + "\n\n## Expired cards\n\n- Store credit from an **expired** card is restored "
              "for 30 days.\n- <script>window.__ran = 1</script> is shown as text.")
    page.get_by_test_id("policy-note").fill("Expired cards: 30 days of restored credit")
    page.get_by_test_id("policy-preview-button").click()
    preview = page.get_by_test_id("policy-preview-text")
    expect(preview.locator("h4")).to_have_text("Expired cards")
    expect(preview.locator("li strong")).to_have_text("expired")
    expect(preview).to_contain_text("<script>window.__ran = 1</script> is shown as text.")
    assert page.evaluate("() => window.__ran") is None
    assert PolicyDocument.objects.get(pk=doc.pk).version == 1
    expect(page.get_by_test_id("policy-note")).to_have_value("Expired cards: 30 days of restored credit")
    both_widths(page, "policy-edit-preview")

    # Save: version 2, named after the person, with the note; the agent's next search reads it.
    page.get_by_test_id("policy-save").click()
    expect(page.get_by_test_id("policy-saved")).to_contain_text("Saved as version 2")
    latest = page.get_by_test_id("policy-history-item").first
    expect(latest).to_have_attribute("data-version", "2")
    expect(latest.get_by_test_id("policy-history-who")).to_contain_text(STAFF_NAME)
    expect(latest.get_by_test_id("policy-history-who")).to_contain_text("Console")
    expect(latest.get_by_test_id("policy-history-note")).to_have_text("Expired cards: 30 days of restored credit")
    expect(page.get_by_test_id("policy-meta")).to_contain_text(re.compile(rf"Last changed by {STAFF_NAME} \(console\)"))
    hit = agent_reads(gift_card_title)
    assert hit["version"] == 2 and PolicyDocument.objects.get(pk=doc.pk).version == 2
    assert "expired" in PolicyDocument.objects.get(pk=doc.pk).body
    both_widths(page, "policy-page")

    # Version 1 against the current one: the added lines marked.
    page.get_by_test_id("policy-history-link").click()
    expect(page.get_by_test_id("policy-version-meta")).to_contain_text(STAFF_NAME)
    added = page.get_by_test_id("policy-diff").get_by_test_id("diff-added")
    expect(added.filter(has_text="Expired cards")).to_have_count(1)
    expect(page.get_by_test_id("policy-diff").get_by_test_id("diff-removed")).to_have_count(0)
    both_widths(page, "policy-version")

    # The list says who changed it last, and where.
    page.get_by_test_id("nav-policies").click()
    row = page.locator(f'[data-testid="policy-row"][data-doc="{doc.doc_id}"]')
    expect(row.get_by_test_id("policy-row-version")).to_have_text("v2")
    expect(row.get_by_test_id("policy-row-changed")).to_contain_text(STAFF_NAME)
    expect(row).to_contain_text("Console")


def test_a_save_over_a_version_saved_meanwhile_is_refused_and_the_text_stays(staff_page, gift_card_title):
    from support.desk import policy_edit
    from support.desk.demo import demo_staff_user

    page = staff_page("/console/policies/+new/")
    page.get_by_test_id("policy-title-input").fill(gift_card_title)
    page.get_by_test_id("policy-body").fill("Gift cards are not refunded in cash.")
    page.get_by_test_id("policy-note").fill("First version")
    page.get_by_test_id("policy-save").click()
    page.get_by_test_id("policy-edit").click()
    page.get_by_test_id("policy-body").fill("Gift cards are never refunded in cash, nor exchanged.")
    page.get_by_test_id("policy-note").fill("Exchanges too")

    # Meanwhile another save of the same policy (another tab, another lead).
    doc = PolicyDocument.objects.get(title=gift_card_title)
    draft = policy_edit.PolicyDraft(doc.title, "Gift cards are refunded as store credit only.", "", "Store credit")
    assert policy_edit.policy_save(user=demo_staff_user(), doc_id=doc.doc_id, draft=draft, based_on=1).version == 2

    page.get_by_test_id("policy-save").click()
    expect(page.get_by_test_id("policy-conflict")).to_contain_text("saved version 2 while you were editing")
    expect(page.get_by_test_id("policy-body")).to_have_value("Gift cards are never refunded in cash, nor exchanged.")
    expect(page.get_by_test_id("policy-preview").get_by_test_id("diff-removed")).to_contain_text("store credit only")
    assert PolicyDocument.objects.get(pk=doc.pk).body == "Gift cards are refunded as store credit only."
    both_widths(page, "policy-conflict")

    page.get_by_test_id("policy-save").click()  # seen: now saved over version 2, which stays in the history
    expect(page.get_by_test_id("policy-saved")).to_contain_text("Saved as version 3")
    assert PolicyDocument.objects.get(pk=doc.pk).body == "Gift cards are never refunded in cash, nor exchanged."
