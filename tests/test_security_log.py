"""Refusals a person watching for attacks needs to see are logged on `support.security` (WARNING) with where
they came from and why; e-mail addresses appear only as digests."""

import logging

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from agentsite.asgi import application
from support.desk import services

pytestmark = pytest.mark.django_db(transaction=True)
STRANGER = "203.0.113.66"


def start(body, address=STRANGER):
    return Client(REMOTE_ADDR=address).post("/api/conversations", body, content_type="application/json")


def security(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "support.security"]


def test_a_wrong_order_number_is_logged_with_the_address_and_no_email(demo, caplog):
    caplog.set_level(logging.WARNING, logger="support.security")
    assert start({"email": "maya@example.com", "order_number": "SU-99999"}).status_code == 403
    [line] = security(caplog)
    assert STRANGER in line and "wrong order number" in line and "maya@example.com" not in line


def test_a_forged_shop_token_is_logged(demo, caplog):
    caplog.set_level(logging.WARNING, logger="support.security")
    assert start({"customer_token": "forged:token"}).status_code == 403
    assert any(STRANGER in line and "forged or expired shop token" in line for line in security(caplog))


def test_a_rate_limit_refusal_is_logged_with_what_was_counted(demo, caplog, settings):
    settings.MESSAGES_PER_MINUTE = 1
    conversation = services.conversation_start(customer=demo.maya)
    services.conversation_post_message(conversation=conversation, text="one", client_address=STRANGER)
    caplog.set_level(logging.WARNING, logger="support.security")
    with pytest.raises(services.RateLimited):
        services.conversation_post_message(conversation=conversation, text="two", client_address=STRANGER)
    assert any("refused over a limit" in line and str(conversation.public_id) in line for line in security(caplog))


def test_a_socket_with_a_bad_token_is_logged(demo, caplog):
    conversation = services.conversation_start(customer=demo.maya)
    caplog.set_level(logging.WARNING, logger="support.security")

    async def attempt():
        ws = WebsocketCommunicator(application, f"/ws/conversations/{conversation.public_id}/",
                                   headers=[(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")])
        await ws.connect()
        await ws.send_json_to({"type": "resume", "token": "not-a-token", "last_seq": 0})
        out = await ws.receive_output(timeout=3)
        await ws.disconnect()
        return out

    assert async_to_sync(attempt)()["code"] == 4401
    assert any("customer socket refused" in line and str(conversation.public_id) in line for line in security(caplog))
