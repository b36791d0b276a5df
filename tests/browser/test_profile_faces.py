"""The widget speaks as the live profile: on a desk set up as Hearth & Loom (German only, its own colour, logo,
launcher label and hours) every word and label a customer can see or hear names Hearth & Loom and its agent, and
none says "Sundry" or "marketplace"; axe finds nothing serious at 1280 and 390 px.

The site under test runs the demo's profile in its own processes, so the widget's start-up data (GET
/api/widget) is answered here with what the desk answers for Hearth & Loom's profile (support.customers.faces,
under that profile), and the demo page's own overrides on the script tag are taken off. The messages are real:
saved in the database and replayed by the site's socket.
"""

from __future__ import annotations

from dataclasses import replace

from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from support.customers import faces, identity
from support.desk import services, takeover
from support.models import Customer, Message
from support.profiles import NEUTRAL
from tests.browser.conftest import ARTIFACTS, open_widget
from tests.browser.test_a11y import WIDTHS, serious_violations
from tests.hearth_and_loom import HEARTH_AND_LOOM, UNWANTED

LOGO_PATH = "/static/support/hearth-and-loom.svg"
LOGO = ('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40" viewBox="0 0 40 40"><rect width="40" height="40" fill="#8a3b12"/>'
        '<path d="M8 30V10h6v8h12v-8h6v20h-6v-8H14v8z" fill="#fff"/></svg>')
# The demo shop's page, its script tag stripped of the shop's own overrides (colour, hours) before the widget
# runs, so the profile's apply; the page around the widget is the demo's storefront and is not walked.
NO_OVERRIDES = """new MutationObserver((changes, observer) => {
    const tag = document.querySelector('script[src*="widget.js"]');
    if (!tag) return;
    for (const name of ["data-accent", "data-accent-text", "data-hours", "data-hours-zone", "data-reply-time"]) tag.removeAttribute(name);
    observer.disconnect();
}).observe(document, {childList: true, subtree: true});"""

# Every text of the widget a customer sees or a screen reader says: text, labels, placeholders, alt and titles.
WIDGET_WORDS = """() => {
    const root = document.querySelector('[data-testid="widget-host"]').shadowRoot;
    const words = [root.textContent];
    for (const el of root.querySelectorAll("*")) {
        for (const name of ["aria-label", "placeholder", "title", "alt"]) {
            if (el.getAttribute(name)) words.push(el.getAttribute(name));
        }
    }
    return words.join("\\n");
}"""


def a_conversation_with_replies(email: str) -> tuple[str, str]:
    """Maya's conversation, with an answer from the agent, a person joining and one from them: (token, id)."""
    conversation = services.conversation_start(customer=Customer.objects.get(email=email))
    sam, _ = get_user_model().objects.get_or_create(username="sam-hl", defaults={"first_name": "Sam", "is_staff": True})
    conversation.language = "de"
    conversation.save(update_fields=["language"])
    services.message_append(conversation=conversation, author=Message.AGENT,
                            wire={"role": "assistant", "content": "Ihre Decke ist unterwegs."})
    services.message_append(conversation=conversation, author=Message.SYSTEM,
                            wire={"role": "assistant", "content": takeover.joined_notice(sam, conversation=conversation)})
    services.message_append(conversation=conversation, author=Message.STAFF, user=sam,
                            wire={"role": "assistant", "content": "Ich kümmere mich darum."})
    return identity.conversation_token(conversation), str(conversation.public_id)


def test_a_hearth_and_loom_desk_shows_its_own_name_look_and_hours_and_never_sundry(customer_page, monkeypatch):
    # The logo on the desk's own origin: the demo page's strict CSP loads images from there only.
    profile = replace(HEARTH_AND_LOOM, appearance=replace(HEARTH_AND_LOOM.appearance, logo_url=LOGO_PATH))
    monkeypatch.setattr("support.profiles.selectors.live", lambda: profile)
    face = faces.widget_face()
    token = identity.customer_token("maya@example.com")  # as the demo page signs it: the same payload
    conversation_token, conversation_id = a_conversation_with_replies("maya@example.com")

    def before(page):
        page.route("**/api/widget", lambda route: route.fulfill(json=face))
        page.route("**" + LOGO_PATH, lambda route: route.fulfill(body=LOGO, content_type="image/svg+xml"))
        page.add_init_script(NO_OVERRIDES)
        page.add_init_script(f"""localStorage.setItem("sundry-widget:c:{token.split(":")[0]}",
            JSON.stringify({{id: "{conversation_id}", token: "{conversation_token}"}}));""")

    # An English browser in Vienna: the shop offers German only, so German it is.
    page = customer_page(before=before, locale="en-GB", timezone_id="Europe/Vienna")

    launcher = page.get_by_test_id("widget-button")
    expect(launcher.locator(".sw-launcher-label")).to_have_text("Fragen Sie uns")
    expect(launcher).to_have_accessible_name("Fragen Sie uns")  # its visible label (axe: label-content-name-mismatch)
    assert launcher.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(138, 59, 18)"  # #8a3b12
    open_widget(page)
    expect(page.locator(".sw-title")).to_have_text("Hearth & Loom-Support")
    expect(page.locator(".sw-intro")).to_have_text(
        "Hallo! Ich bin Hearth & Loom Assistent. Fragen Sie mich zu einer Bestellung, einer Lieferung oder einer "
        "Erstattung. Jede Erstattung prüft jemand aus unserem Team, bevor sie ausgezahlt wird.")
    expect(page.locator(".sw-hours-list")).to_have_text("Zeiten: Mo–Fr 09:00–18:00, Sa 10:00–14:00 (Ortszeit Vienna)")
    expect(page.locator(".sw-logo")).to_have_js_property("naturalWidth", 40)
    names = page.locator('[data-testid="widget-message"] .sw-name')
    expect(names).to_have_text(["Hearth & Loom Assistent", "Sam · Hearth & Loom-Team"])
    expect(page.locator('[data-testid="widget-message"][data-author="system"]')).to_have_text(
        "Sam aus unserem Team ist dem Gespräch beigetreten.")

    problems = []
    for width, height in WIDTHS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(250)  # the panel settles into the dock or the sheet
        problems += [f"{width} px: {v['impact']} {v['id']}: {v['help']} {v['nodes']}" for v in serious_violations(page)]
        page.screenshot(path=str(ARTIFACTS / f"hearth-and-loom-widget-{width}.png"))
        words = page.evaluate(WIDGET_WORDS)
        assert "Hearth & Loom" in words and not UNWANTED.search(words), UNWANTED.findall(words)
    assert problems == []


def test_a_desk_being_set_up_says_so_in_plain_words_and_offers_no_composer(customer_page, monkeypatch):
    # What the desk answers for a shop's own desk before its first publish: the neutral profile, setting_up.
    monkeypatch.setattr("support.profiles.selectors.live", lambda: NEUTRAL)
    monkeypatch.setattr("support.profiles.selectors.being_set_up", lambda: True)
    face = faces.widget_face()
    assert face["setting_up"] is True
    sent = []

    def before(page):
        page.route("**/api/widget", lambda route: route.fulfill(json=face))
        page.add_init_script(NO_OVERRIDES)
        page.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)

    page = customer_page(before=before, locale="de-DE", timezone_id="Europe/Berlin")
    page.get_by_test_id("widget-button").click()
    expect(page.get_by_test_id("widget-panel")).to_have_attribute("data-connection", "setting_up")
    notice = page.get_by_test_id("widget-setup")
    expect(notice).to_be_visible()
    expect(notice).to_have_text("Der Support wird gerade eingerichtet"
                                "Hier können wir noch keine Nachrichten annehmen. Bitte schauen Sie etwas später "
                                "wieder vorbei.")
    expect(page.get_by_test_id("widget-composer")).to_be_hidden()
    expect(page.locator(".sw-suggestion")).to_have_count(0)
    expect(page.locator(".sw-intro")).to_have_count(0)

    problems = []
    for width, height in WIDTHS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(250)  # the panel settles into the dock or the sheet
        problems += [f"{width} px: {v['impact']} {v['id']}: {v['help']} {v['nodes']}" for v in serious_violations(page)]
        page.screenshot(path=str(ARTIFACTS / f"widget-being-set-up-{width}.png"))
        words = page.evaluate(WIDGET_WORDS)
        assert not UNWANTED.search(words), UNWANTED.findall(words)
    assert problems == [] and not [url for url in sent if "/api/" in url]  # nothing was sent to the desk
