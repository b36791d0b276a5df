"""What a customer sees speaks as the live agent profile: a desk set up as Hearth & Loom (single-brand, German)
shows its name, its agent's, its look and hours, its e-mail sender and footer, and never "Sundry" nor
"marketplace": in the widget's start-up data, the e-mails, the customer pages and the notices. The demo reads
as it always did. (The widget's own rendering of it: tests/browser/test_profile_faces.py.)
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client

from support.customers import faces, languages, notify, signin
from support.desk import inbox, notices, services, staff_actions, takeover
from support.models import Conversation, Message
from tests.hearth_and_loom import LOGO_URL, UNWANTED, hearth_and_loom  # noqa: F401  (fixture)
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)


@pytest.fixture
def chat(demo, monkeypatch, settings):
    """Maya's conversation; she wrote, left, and a person and the agent answered."""
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id, **ids: None)
    settings.DESK_PUBLIC_URL = "https://desk.example"
    settings.REPLY_EMAILS = True
    conversation = services.conversation_start(customer=demo.maya)
    services.conversation_post_message(conversation=conversation, text="Wo ist meine Bestellung?")
    sam = get_user_model().objects.create_user("sam", first_name="Sam", is_staff=True)
    for author, user, text in ((Message.AGENT, None, "Ihr Paket ist unterwegs."),
                               (Message.STAFF, sam, "Ich habe beim Kurier nachgefragt.")):
        message = services.message_append(conversation=conversation, author=author, user=user,
                                          wire={"role": "assistant", "content": text})
        Message.objects.filter(pk=message.pk).update(created_at=datetime(2024, 5, 14, 14, 2, tzinfo=UTC))
    return conversation


def reply_email(conversation):
    mail.outbox.clear()
    notify.send_reply_emails(now=datetime(2024, 5, 14, 15, 0, tzinfo=UTC))
    assert len(mail.outbox) == 1
    return mail.outbox[0]


def everything_in(message) -> str:
    return "\n".join([message.subject, message.from_email, message.body,
                      *(content for content, _ in message.alternatives), *map(str, message.extra_headers.values())])


# -- the widget's start-up data -------------------------------------------------------------------------------

def test_the_widget_reads_the_shops_names_look_languages_and_hours_from_the_live_profile(hearth_and_loom, db):
    response = Client().get("/api/widget")
    assert response.status_code == 200 and response["Cache-Control"] == "no-cache"
    face = response.json()
    assert face == {
        "shop_name": "Hearth & Loom", "agent_name": {"en": "Hearth & Loom Assistent", "de": "Hearth & Loom Assistent"},
        "languages": ["de"], "colour": "#8a3b12", "greeting": "", "launcher_label": "Fragen Sie uns",
        "logo_url": LOGO_URL, "hours": "Mon-Fri 09:00-18:00, Sat 10:00-14:00", "hours_zone": "Europe/Vienna",
        "setting_up": False}
    assert not UNWANTED.search(response.content.decode())


def test_the_demo_widget_reads_sundrys_face_with_its_agent_named_in_each_language(db):
    face = Client().get("/api/widget").json()
    assert face["shop_name"] == "Sundry" and face["languages"] == ["en", "de"]
    assert face["agent_name"] == {"en": "Sundry's assistant", "de": "der Assistent von Sundry"}
    assert face["colour"] == "#0f5d57"  # the demo's accent, as the widget always showed it
    assert face["hours"] == "" and face["hours_zone"] is None  # the demo page sets its hours on the script tag


@pytest.mark.parametrize("colour, logo", [("red; background: url(x)", "javascript:alert(1)"),
                                          ("#12345", "//evil.example/x.svg"), ("0f5d57", "data:image/svg+xml,<svg>"),
                                          ("#0f5d5g", "http://plain.example/logo.png")])
def test_a_colour_or_logo_that_is_not_one_the_widget_may_use_is_not_given_to_it(monkeypatch, db, colour, logo):
    profile = faces.selectors.live()
    odd = SimpleNamespace(**{**profile.__dict__, "appearance": SimpleNamespace(
        colour=colour, greeting="", launcher_label="", logo_url=logo)})
    monkeypatch.setattr("support.profiles.selectors.live", lambda: odd)
    face = Client().get("/api/widget").json()
    assert face["colour"] is None and face["logo_url"] is None


def test_opening_hours_are_written_as_day_ranges_and_closed_days_left_out():
    assert faces.hours_text({}) == ""
    assert faces.hours_text({0: "09:00-17:00", 1: "09:00-17:00", 3: "09:00-17:00", 4: "", 6: "10:00-12:00"}) == \
        "Mon-Tue 09:00-17:00, Thu 09:00-17:00, Sun 10:00-12:00"


# -- e-mails ---------------------------------------------------------------------------------------------------

def test_the_reply_email_of_a_hearth_and_loom_desk_names_the_shop_its_sender_and_footer_in_german(
        hearth_and_loom, chat):
    Conversation.objects.filter(pk=chat.pk).update(language="de")  # as the widget set it
    message = reply_email(chat)
    assert message.from_email == "Hearth & Loom Kundenservice <support@hearth-loom.example>"
    assert message.subject == "2 neue Antworten vom Hearth & Loom-Support"  # German: the shop's only language
    assert "Der Hearth & Loom-Support hat geantwortet, während Sie weg waren:" in message.body
    assert "Hearth & Loom Assistent, Di 14 Mai" in message.body and "Sam vom Hearth & Loom-Support" in message.body
    assert message.body.rstrip().endswith("Hearth & Loom GmbH · Webergasse 4 · 1060 Wien")
    html = message.alternatives[0][0]
    assert "Hearth &amp; Loom GmbH · Webergasse 4 · 1060 Wien" in html and "<title>Hearth &amp; Loom-Support" in html
    assert not UNWANTED.search(everything_in(message))


def test_the_demos_reply_email_reads_as_it_always_did(chat, settings):
    Conversation.objects.filter(pk=chat.pk).update(language="en")
    message = reply_email(chat)
    assert message.from_email == "Sundry support <support@sundry.example>"
    assert message.subject == "2 new replies from Sundry support"
    assert "Sundry support replied while you were away:" in message.body
    assert "Sundry's assistant, Tue 14 May" in message.body and "Sam from Sundry support" in message.body


def test_the_sign_in_code_email_names_the_shop_and_its_sender(hearth_and_loom, demo, limits_redis):
    signin.send_code("maya@example.com", uuid.uuid4().hex)
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.subject.startswith("Your Hearth & Loom sign-in code: ")
    assert message.from_email == "Hearth & Loom Kundenservice <support@hearth-loom.example>"
    assert "the support chat of Hearth & Loom" in message.body
    assert "Hearth & Loom Kundenservice" in message.body and "1060 Wien" in message.body
    assert not UNWANTED.search(everything_in(message))


# -- customer pages ----------------------------------------------------------------------------------------------

def test_the_pages_a_link_opens_name_the_shop_and_never_sundry(hearth_and_loom, chat):
    Conversation.objects.filter(pk=chat.pk).update(language="de")
    unsubscribe = f"/c/unsubscribe/{notify.unsubscribe_token(chat.customer)}/"
    pages = [Client().get(f"/c/{notify.link_token(chat)}/"), Client().get("/c/not-a-link/"),
             Client().get(unsubscribe), Client().post(unsubscribe, {"action": "stop"}),
             Client().post(unsubscribe, {"action": "resume"})]
    assert [page.status_code for page in pages] == [200, 404, 200, 200, 200]
    for page in pages:
        text = page.content.decode()
        assert '<h1 class="link-title">Hearth &amp; Loom</h1>' in text and "· Hearth &amp; Loom-Support</title>" in text
        assert not UNWANTED.search(text), text
    assert "im Chat auf der Website von Hearth &amp; Loom" in pages[3].content.decode()


# -- notices -----------------------------------------------------------------------------------------------------

def test_every_notice_the_desk_writes_to_a_customer_is_free_of_sundry_and_marketplace(hearth_and_loom, chat, demo):
    sam = get_user_model().objects.get(username="sam")
    order = SimpleNamespace(currency="EUR", number="HL-1001")
    said = []
    for language in ("de", "en"):
        Conversation.objects.filter(pk=chat.pk).update(language=language)
        chat.refresh_from_db()
        said += [languages.say(chat, notice) for notice in (notices.ESCALATED, notices.STOPPED, notices.SHOP_AWAY)]
        for user in (sam, None):
            said += [takeover.joined_notice(user, conversation=chat), inbox.closed_notice(user, conversation=chat),
                     takeover.handed_back_notice(user, conversation=chat)]
        said += [staff_actions.refund_notice(Decimal("12.50"), order, reference, chat) for reference in ("", "R-1")]
    assert len(said) == 2 * 11 and all(said)
    assert not [text for text in said if UNWANTED.search(text)]


def test_a_german_only_shop_writes_to_a_customer_who_chose_no_language_in_german(hearth_and_loom, chat):
    Conversation.objects.filter(pk=chat.pk).update(language="")
    chat.refresh_from_db()
    assert languages.of(chat) == "de"
    assert reply_email(chat).subject.startswith("2 neue Antworten")


def test_the_demo_still_writes_in_english_to_a_customer_who_chose_no_language(chat):
    Conversation.objects.filter(pk=chat.pk).update(language="")
    chat.refresh_from_db()
    assert languages.of(chat) == "en"  # the demo's profile offers English first
