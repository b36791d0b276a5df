"""A shop's own desk (SHOP_BACKEND http or shopify) is being set up until its first agent profile is published:
the widget says so, and the desk itself refuses a customer's message, whatever the client, so no run starts.
An e-mail is kept for a person, without a run. The demo is live from seeding. Nothing the desk says before
go-live names Sundry.

Who may do what: anyone may read the widget's face; while the desk is being set up no one may start a
conversation or post a message, words or files, over HTTP or the socket; staff may still read and answer."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from agentsite.asgi import application

from support import profiles
from support.customers import identity
from support.desk import inbound_mail, services, uploads
from support.live import events
from support.models import Conversation, Customer, InboundEmail, Message, Run
from tests.desk_factories import make_user
from tests.hearth_and_loom import UNWANTED
from tests.mail_factories import mail
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)
from tests.shop_fixture import shop_settings  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def setting_up(shop_settings, queued):
    """A desk on the reference shop over HTTP, nothing published yet."""
    settings = shop_settings
    settings.INBOUND_EMAIL_ADDRESS = "support@shop.example"
    return queued


@pytest.fixture
def ada(db):
    return Customer.objects.create(name="Ada Lind", email="ada@example.com")


HEADERS = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]


def bearer(conversation) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {identity.conversation_token(conversation)}"}


def test_the_widget_is_told_support_is_being_set_up(setting_up):
    face = Client().get("/api/widget").json()
    assert face["setting_up"] is True and face["shop_name"] == ""  # the widget says "Customer support"
    assert not UNWANTED.search(json.dumps(face))  # the neutral built-in profile: no shop's name


def test_the_desk_refuses_a_new_conversation_with_its_first_message(setting_up, ada):
    refused = Client().post("/api/conversations", json.dumps({
        "customer_token": identity.customer_token(ada.email), "message": {"text": "Hallo?", "client_id": "c1"}}),
        content_type="application/json")
    assert refused.status_code == 503
    assert refused.json() == {"error": "Support is being set up and can't take messages yet. Please come back a "
                                       "little later.", "code": "being_set_up", "retryable": False}
    assert not Conversation.objects.exists() and not Run.objects.exists() and not setting_up


def test_the_desk_refuses_a_message_in_an_existing_conversation_and_saves_nothing(setting_up, ada):
    conversation = services.conversation_start(customer=ada)
    refused = Client().post(f"/api/conversations/{conversation.public_id}/messages",
                            json.dumps({"text": "Wo bleibt mein Paket?"}), content_type="application/json",
                            **bearer(conversation))
    assert refused.status_code == 503 and refused.json()["code"] == "being_set_up"
    assert not conversation.messages.filter(author=Message.CUSTOMER).exists() and not Run.objects.exists()


def test_the_services_refuse_whatever_door_a_client_uses(setting_up, ada):
    conversation = services.conversation_start(customer=ada)
    with pytest.raises(services.BeingSetUp):
        services.conversation_post_message(conversation=conversation, text="Hallo")
    with pytest.raises(services.BeingSetUp):
        services.conversation_open_with_message(opening=services.Opening(customer=ada), text="Hallo")
    with pytest.raises(services.BeingSetUp):
        uploads.conversation_post_files(conversation=conversation, text="", uploads=[])
    assert not Message.objects.filter(author=Message.CUSTOMER).exists() and not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_customer_socket_refuses_a_message_too(setting_up, ada, limits_redis):
    conversation = services.conversation_start(customer=ada)
    token = identity.conversation_token(conversation)
    # Its conversation.updated goes out now, before the socket joins: otherwise it may come in after the join, and
    # be the frame read below (it was, once, in a loaded run).
    events.publisher.flush()

    async def go():
        ws = WebsocketCommunicator(application, f"/ws/conversations/{conversation.public_id}/", headers=HEADERS)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "resume", "token": token, "last_seq": 0})
        while (await ws.receive_json_from(timeout=3))["type"] != "replay.done":
            pass
        await ws.send_json_to({"type": "message", "text": "Hallo?", "client_id": "s-1"})
        answer = await ws.receive_json_from(timeout=3)
        await ws.disconnect()
        return answer

    answer = async_to_sync(go)()
    assert (answer["type"], answer["code"], answer["client_id"]) == ("message.rejected", "being_set_up", "s-1")
    assert not conversation.messages.filter(author=Message.CUSTOMER).exists() and not Run.objects.exists()


def test_an_email_is_kept_for_a_person_without_a_run(setting_up, ada):
    record = inbound_mail.receive(mail(sender="ada@example.com", text="Wo bleibt mein Paket?"), source="imap")
    assert record.outcome == InboundEmail.STARTED
    conversation = record.conversation
    assert conversation.messages.get(author=Message.CUSTOMER).content == "Wo bleibt mein Paket?"
    conversation.refresh_from_db()
    assert conversation.status == Conversation.NEEDS_ATTENTION
    assert conversation.attention_reason == inbound_mail.SET_UP_REASON
    assert not Run.objects.exists() and not setting_up


def test_after_the_first_publish_the_widget_and_the_desk_take_messages(setting_up, ada):
    lead = make_user("lee", staff=True, group="leads")
    profiles.draft_save(data={**profiles.live().as_data(), "shop_name": "Hearth & Loom"}, by=lead)
    profiles.draft_publish(by=lead)
    assert Client().get("/api/widget").json()["setting_up"] is False
    conversation = services.conversation_start(customer=ada)
    message, run, created = services.conversation_post_message(conversation=conversation, text="Hallo")
    assert created and run is not None and run.profile_version.number == 1


def test_the_demo_is_live_from_seeding(demo, queued):
    assert Client().get("/api/widget").json()["setting_up"] is False
    assert profiles.live().shop_name == "Sundry"


def test_before_go_live_the_built_in_profile_names_no_shop(setting_up):
    assert not UNWANTED.search(json.dumps(profiles.live().as_data()))
    assert not UNWANTED.search(json.dumps(profiles.version_profile(None).as_data()))


def test_a_shop_being_set_up_starts_from_defaults_that_name_no_shop(setting_up):
    # The profile page's defaults (what an empty field falls back to) and a draft test's live side before any
    # version is published are the neutral built-in profile, not the demo's.
    from support.desk import agent_profile
    from support.trials.services import _profile

    assert not profiles.gone_live()
    defaults = agent_profile.profile_json()["defaults"]
    assert defaults["shop_name"] != "Sundry" and "sundry" not in json.dumps(defaults).lower()
    live_side, named = _profile(type("Test", (), {"live_version_id": None})(), "live")
    assert "sundry" not in json.dumps(live_side).lower() and named == "the built-in defaults (none published)"
