"""A person typing: the console's reply box posts /typing while a staff member writes, and the customer's
widget is told "<name> is typing…" (staff.typing on the customer's group). Nothing is saved.

Who may: staff (session + CSRF). A customer's token, a non-staff account and an anonymous visitor get a
403 and nothing is sent.
"""

from __future__ import annotations

import pytest
from django.test import Client

from support.customers import identity
from support.live import events
from tests.desk_factories import make_user, record_events, start_conversation


@pytest.fixture
def sent(monkeypatch):
    return record_events(monkeypatch)


@pytest.fixture
def chat(demo):
    return start_conversation(demo.maya)


def staff_client(username="sam", first_name="Sam", staff=True, csrf=False):
    user = make_user(username, staff=staff)
    user.first_name = first_name
    user.save()
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def test_staff_typing_is_relayed_to_the_customers_widget_with_their_name(chat, sent):
    response = staff_client().post(f"/api/staff/conversations/{chat.public_id}/typing", "{}",
                                   content_type="application/json")
    assert response.status_code == 202
    assert sent == [([events.conversation_group(chat.public_id)],
                     {"type": "staff.typing", "conversation": str(chat.public_id), "seq": chat.last_seq,
                      "name": "Sam"})]


def test_typing_reaches_no_other_conversation_and_no_staff_group(chat, sent, demo):
    other = start_conversation(demo.tom)
    staff_client().post(f"/api/staff/conversations/{chat.public_id}/typing", "{}", content_type="application/json")
    groups = [g for gs, _ in sent for g in gs]
    assert groups == [events.conversation_group(chat.public_id)]
    assert events.conversation_group(other.public_id) not in groups


def test_only_staff_may_say_they_are_typing(chat, sent):
    url = f"/api/staff/conversations/{chat.public_id}/typing"
    token = identity.conversation_token(chat)
    assert Client().post(url, "{}", content_type="application/json").status_code == 403
    assert Client().post(url, "{}", content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 403
    customer = staff_client("chris", "Chris", staff=False)
    assert customer.post(url, "{}", content_type="application/json").status_code == 403
    assert sent == []


def test_typing_needs_the_csrf_token(chat, sent):
    response = staff_client(csrf=True).post(f"/api/staff/conversations/{chat.public_id}/typing", "{}",
                                            content_type="application/json")
    assert response.status_code == 403 and "CSRF" in response.json()["error"]
    assert sent == []


def test_typing_in_an_unknown_conversation_is_a_404(db, sent):
    client = staff_client()
    for public_id in ("00000000-0000-0000-0000-000000000000", "not-a-uuid"):
        assert client.post(f"/api/staff/conversations/{public_id}/typing", "{}",
                           content_type="application/json").status_code == 404
    assert sent == []
