"""A desk set up as Hearth & Loom (single-brand, German, on the reference shop over HTTP), end to end: a real
worker runs the agent with the model stand-in for a customer who writes in the widget and one who writes by
e-mail, and every string the customer can see (the widget's face, the messages, the reply e-mail with its
subject and footer, the conversation's page) and everything the model was sent (the prompt, the shop's rules,
the tool descriptions) names Hearth & Loom and contains neither "Sundry" nor "marketplace"; the German is the
profile's formal "Sie". Before its first publish the same desk takes no message (the setup gate)."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.core import mail as outbox
from django.test import Client
from django.utils import timezone

from standin.shop import start_in_thread
from support import profiles
from support.customers import identity, notify
from support.desk import inbound_mail
from support.models import Conversation, Customer, Message, Run
from tests.desk_factories import make_user
from tests.hearth_and_loom import HEARTH_AND_LOOM, UNWANTED
from tests.mail_factories import mail
from tests.shop_fixture import KEY

from .conftest import snapshot, wait_for, wait_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

SHOP = HEARTH_AND_LOOM.shop_name
ADDRESS = "support@hearth-loom.example"
WHERE = "Wo ist meine Bestellung SU-41210?"
INFORMAL = re.compile(r"\b(du|dich|dir|dein|deine|deinen|deiner)\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def hearth_shop():
    """The reference shop as the single-brand store Hearth & Loom (its own orders, no sellers)."""
    server = start_in_thread(keys=(KEY,), single_brand=SHOP)
    yield server
    server.stop()


@pytest.fixture
def desk(hearth_shop, settings):
    env = {"SHOP_BACKEND": "http", "SHOP_URL": hearth_shop.base_url, "SHOP_API_KEY": KEY}
    for name, value in {**env, "INBOUND_EMAIL_ADDRESS": ADDRESS, "DEFAULT_FROM_EMAIL": ADDRESS,
                        "DESK_PUBLIC_URL": "https://desk.hearth-loom.example", "REPLY_EMAILS": True}.items():
        setattr(settings, name, value)
    return {**env, "SHOP_READ_TIMEOUT_SECONDS": "10"}  # the worker's environment


def stopped(conversation: Conversation) -> Run:
    run = wait_for(lambda: Run.objects.filter(conversation=conversation).order_by("-id").first(),
                   message="a run of the conversation")
    run = wait_run(run, Run.STOPPED, timeout=60)
    assert run.stop_reason == "answered", snapshot(conversation)
    return run


def agent_answer(conversation: Conversation) -> str:
    return conversation.messages.filter(author=Message.AGENT, role="assistant").exclude(content="").order_by(
        "-seq").values_list("content", flat=True).first() or ""


def everything_in(message) -> str:
    return "\n".join([message.subject, message.from_email, message.body,
                      *(content for content, _ in message.alternatives), *map(str, message.extra_headers.values())])


def test_a_hearth_and_loom_desk_by_widget_and_by_email_never_says_sundry_or_marketplace(desk, worker,
                                                                                         model_server):
    Customer.objects.create(name="Maya Okafor", email="maya@example.com")  # the shop's customer, known to the desk
    widget = Client()
    assert widget.get("/api/widget").json()["setting_up"] is True  # nothing published yet: no run starts
    token = identity.customer_token("maya@example.com")
    first = {"customer_token": token, "language": "de", "message": {"text": WHERE, "client_id": "hl-1"}}
    assert widget.post("/api/conversations", json.dumps(first), content_type="application/json").status_code == 503

    lead = make_user("lee", staff=True, group="leads")
    profiles.draft_save(data=HEARTH_AND_LOOM.as_data(), by=lead)
    profiles.draft_publish(by=lead)
    worker(**desk)
    seen: dict[str, str] = {}  # where → what the customer (or the model) read there

    face = widget.get("/api/widget")
    assert face.json()["setting_up"] is False and face.json()["shop_name"] == SHOP
    seen["the widget's face"] = face.content.decode()

    # In the widget: the conversation and its first message in one request, answered by the worker.
    started = widget.post("/api/conversations", json.dumps(first), content_type="application/json")
    assert started.status_code == 201, started.content
    chat = Conversation.objects.get(public_id=started.json()["conversation"]["id"])
    stopped(chat)
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {started.json()['token']}"}
    seen["the widget's messages"] = widget.get(f"/api/conversations/{chat.public_id}/messages", **bearer).content.decode()
    answer = agent_answer(chat)
    assert "Bestellung SU-41210" in answer and not INFORMAL.search(answer), answer
    thanks = widget.post(f"/api/conversations/{chat.public_id}/messages", json.dumps({"text": "Danke!"}),
                         content_type="application/json", **bearer)
    assert thanks.status_code == 202, thanks.content
    wait_run(Run.objects.get(public_id=thanks.json()["run"]["id"]), Run.STOPPED, timeout=60)
    answer = agent_answer(chat)
    assert re.search(r"\bSie\b", answer) and not INFORMAL.search(answer), answer  # the profile's formal German
    seen["the widget's messages"] = widget.get(f"/api/conversations/{chat.public_id}/messages", **bearer).content.decode()

    # By e-mail, in German: kept, threaded into a conversation of its own, answered by the worker.
    record = inbound_mail.receive(mail(sender="Maya Okafor <maya@example.com>", to=ADDRESS, subject="Meine Bestellung",
                                       text=WHERE, headers={"Content-Language": "de"}), source="imap")
    stopped(record.conversation)
    by_mail = agent_answer(record.conversation)
    assert "SU-41210" in by_mail and not INFORMAL.search(by_mail), by_mail

    # The answers go back by e-mail (the widget's customer left before hers was read): subjects, senders,
    # bodies, footers; and the conversation's page a link in them opens.
    outbox.outbox.clear()
    notify.send_reply_emails(now=timezone.now() + timedelta(hours=2))
    assert outbox.outbox, "no reply e-mail was sent"
    for n, message in enumerate(outbox.outbox):
        text = everything_in(message)
        assert HEARTH_AND_LOOM.email_footer in text and HEARTH_AND_LOOM.email_sender_name in message.from_email
        seen[f"reply e-mail {n + 1}"] = text
        for link in re.findall(r"https://desk\.hearth-loom\.example(/c/[^\s\"<]+)", message.body):
            seen[f"the page {link[:12]}…"] = Client().get(link, follow=True).content.decode()
    assert any(name.startswith("the page") for name in seen), "no conversation link in the reply e-mails"

    # What the model was sent: the prompt with its forms of address, the shop's rules, every tool's description.
    sent = model_server.sent()
    assert any(f"You are {SHOP}'s customer support agent" in text for text in sent)
    assert any('address the customer as "Sie"' in text for text in sent)
    assert not any('"message_seller"' in text for text in sent)  # a single-brand store has no sellers
    seen.update({f"sent to the model {n + 1}": text for n, text in enumerate(sent)})

    leaks = {where: sorted(set(UNWANTED.findall(text))) for where, text in seen.items() if UNWANTED.search(text)}
    assert leaks == {}, {where: UNWANTED.search(seen[where]) and _around(seen[where]) for where in leaks}


def _around(text: str) -> list[str]:
    return [text[max(0, m.start() - 80):m.end() + 80] for m in UNWANTED.finditer(text)][:5]
