"""Links in agent answers say where they go: a link to one of the shop's hosts shows its text; any other
shows its real destination too; link text that names another address than the target is never shown;
only http(s) and mailto, never with credentials. (docs/deploy-security.md, "Links in agent answers")

The demo shop page, its script tag given the shop's hosts (data-link-hosts) before the widget runs, as a
shop would write it. The answer is saved as the model's would be.
"""

from __future__ import annotations

from playwright.sync_api import expect

from support.desk import services
from support.models import Conversation, Message
from tests.browser.conftest import ROOT, agent_messages, api_conversation, open_widget, widget_conversation

SCREENSHOTS = ROOT / "var" / "screenshots"
REL = "noopener noreferrer nofollow"

# One answer, one link per item; what each item must show and open (None: no link at all).
ITEMS = [
    ("[https://sundry.example/help](http://attacker.test/phish)", "http://attacker.test/phish",
     "http://attacker.test/phish"),
    ("[our returns page](https://sundry.example/returns)", "our returns page", "https://sundry.example/returns"),
    ("[the FAQ](https://help.sundry.example/faq)", "the FAQ", "https://help.sundry.example/faq"),
    ("[sundry.example/returns](https://sundry.example/returns)", "sundry.example/returns",
     "https://sundry.example/returns"),
    ("[track your parcel](https://tracker.example/SU-41207)", "track your parcel (tracker.example)",
     "https://tracker.example/SU-41207"),
    ("[your Sundry account](https://sundry.example.attacker.test/)",
     "your Sundry account (sundry.example.attacker.test)", "https://sundry.example.attacker.test/"),
    ("[**https://sundry.example/account**](https://attacker.test/account)", "https://attacker.test/account",
     "https://attacker.test/account"),
    ("[help@sundry.example](mailto:refunds@attacker.test)", "refunds@attacker.test", "mailto:refunds@attacker.test"),
    ("[Email us](mailto:help@attacker.test)", "Email us (help@attacker.test)", "mailto:help@attacker.test"),
    ("[https://sundry.example/](https://sundry.example@attacker.test/)", None, None),
    ("[click](javascript:alert(1))", None, None),
]
LOOKALIKE = "https://\u0455undry.example/login"  # a Cyrillic "s"


# The demo page's script tag, as a shop listing its hosts would write it (set before the deferred script runs).
LIST_SHOP_HOSTS = """new MutationObserver((_, observer) => {
    const tag = document.querySelector('script[src*="widget.js"]');
    if (tag) { tag.dataset.linkHosts = "sundry.example, .sundry.example"; observer.disconnect(); }
}).observe(document, {childList: true, subtree: true});"""


def answer_with(page, text: str) -> None:
    """Save an agent answer in the page's conversation, as a run would, and show it (reload and replay)."""
    conversation = Conversation.objects.get(public_id=widget_conversation(page)["id"])
    services.message_append(conversation=conversation, author=Message.AGENT,
                            wire={"role": "assistant", "content": text})
    page.reload()
    open_widget(page)
    expect(agent_messages(page)).to_have_count(1)


def screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def test_links_show_their_real_destination_unless_they_stay_on_the_shops_hosts(customer_page):
    page = customer_page(before=lambda p: p.add_init_script(LIST_SHOP_HOSTS), viewport={"width": 1280, "height": 900})
    api_conversation(page)  # the answer below is saved in it before the customer writes
    open_widget(page)
    answer_with(page, "Some links:\n\n" + "\n".join(f"{k + 1}. {md}" for k, (md, _, _) in enumerate(ITEMS))
                + f"\n\nAnd {LOOKALIKE} too.")

    answer = agent_messages(page).first
    items = answer.locator("li")
    expect(items).to_have_count(len(ITEMS))
    for k, (markdown, shown, href) in enumerate(ITEMS):
        links = items.nth(k).locator("a")
        if shown is None:
            expect(links).to_have_count(0)
            expect(items.nth(k)).to_have_text(markdown)  # literal, so the customer sees what it was
            continue
        expect(links).to_have_count(1)
        expect(links).to_have_text(shown)
        expect(links).to_have_attribute("href", href)
    expect(answer).not_to_contain_text("https://sundry.example/help")
    expect(answer).not_to_contain_text("https://sundry.example/account")
    expect(answer).not_to_contain_text("help@sundry.example")

    # The look-alike host is shown as the browser resolves it.
    lookalike = answer.locator("p a")
    expect(lookalike).to_have_text(LOOKALIKE + " (xn--undry-g2e.example)")

    for a in answer.locator("a").all():
        expect(a).to_have_attribute("rel", REL)
        expect(a).to_have_attribute("target", "_blank")

    answer.scroll_into_view_if_needed()
    page.get_by_test_id("widget-transcript").evaluate("(t) => t.scrollTop = t.scrollHeight")
    screenshot(page, "links-desktop-1280")
    page.set_viewport_size({"width": 390, "height": 844})
    page.get_by_test_id("widget-transcript").evaluate("(t) => t.scrollTop = t.scrollHeight")
    screenshot(page, "links-phone-390")


def test_without_a_list_the_shops_host_is_the_page_the_widget_is_on(site, customer_page):
    page = customer_page()
    api_conversation(page)  # the answer below is saved in it before the customer writes
    open_widget(page)
    answer_with(page, f"[your orders]({site}/orders) or [elsewhere](https://sundry.example/orders)")

    links = agent_messages(page).first.locator("a")
    expect(links).to_have_count(2)
    expect(links.first).to_have_text("your orders")
    expect(links.last).to_have_text("elsewhere (sundry.example)")
