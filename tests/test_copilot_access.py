"""Who may ask the copilot, and what it refuses: the setting off, a customer, a user who is not staff, a draft for a
conversation no person has, a question empty or too long, a person over their hourly number; a draft of another
conversation or another person is not sent with a reply; a suggested refund made through the staff refund action
keeps that action's confirmation, lead permission and second approval.

Who: Maya is the customer; Sam (a support agent) has her conversation; Alex is another agent; Lee is a lead;
Cora has a login but is not staff."""

import json
import re

import pytest
from django.test import Client

from support import copilot
from support.customers import identity
from support.desk import services, takeover
from support.models import CopilotRun, Message, StaffAction
from tests.copilot_factories import ask, copilot_queued, handed_over, sam  # noqa: F401  (fixtures)
from tests.desk_factories import make_user
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("limits_redis")]


def post(client, conversation, body):
    return client.post(f"/api/staff/conversations/{conversation.public_id}/copilot", json.dumps(body),
                       content_type="application/json")


def reply(client, conversation, text, draft):
    return client.post(f"/api/staff/conversations/{conversation.public_id}/messages",
                       {"text": text, "draft": draft}, content_type="application/json")


@pytest.fixture
def taken(desk, queued, copilot_queued, sam):
    return handed_over(queued, desk.maya, sam)


def test_it_is_refused_when_the_setting_turns_it_off(taken, sam, client, settings):
    settings.COPILOT_ENABLED = False
    client.force_login(sam)
    response = post(client, taken, {"kind": "summary"})
    assert response.status_code == 403 and "turned off" in response.json()["error"]
    assert not CopilotRun.objects.exists()
    assert client.get(f"/api/staff/conversations/{taken.public_id}/copilot").status_code == 403


def test_a_customer_an_anonymous_visitor_and_a_user_who_is_not_staff_are_refused(taken, client):
    token = identity.conversation_token(taken)
    as_customer = client.post(f"/api/staff/conversations/{taken.public_id}/copilot", json.dumps({"kind": "summary"}),
                              content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert as_customer.status_code == 403
    assert Client().get(f"/api/staff/conversations/{taken.public_id}/copilot").status_code == 403
    cora = make_user("cora", staff=False)
    client.force_login(cora)
    assert post(client, taken, {"kind": "summary"}).status_code == 403
    with pytest.raises(copilot.CopilotRefused) as refused:
        copilot.copilot_start(conversation=taken, user=cora, kind="summary")
    assert refused.value.status == 403
    assert not CopilotRun.objects.exists()


def test_a_draft_or_suggestion_needs_a_conversation_a_person_has(desk, copilot_queued, sam, client):
    conversation = services.conversation_start(customer=desk.maya)
    client.force_login(sam)
    for kind in ("draft", "suggest"):
        response = post(client, conversation, {"kind": kind})
        assert response.status_code == 409 and "take the conversation over" in response.json()["error"]
    assert post(client, conversation, {"kind": "summary"}).status_code == 202


@pytest.mark.parametrize("body, words", [
    ({"kind": "ask", "question": "   "}, "Write a question"),
    ({"kind": "ask", "question": "x" * 501}, "at most 500 characters"),
    ({"kind": "rewrite"}, "kind must be one of"),
    ({"kind": "ask", "question": 7}, "question must be text"),
])
def test_a_request_it_cannot_read_is_refused_in_plain_words(taken, sam, client, body, words):
    client.force_login(sam)
    response = post(client, taken, body)
    assert response.status_code == 400 and words in response.json()["error"]


def test_a_person_over_their_hourly_number_is_refused_and_a_colleague_is_not(taken, sam, client, settings,
                                                                             copilot_queued):
    settings.COPILOT_PER_PERSON_PER_HOUR = 2
    client.force_login(sam)
    assert [post(client, taken, {"kind": "summary"}).status_code for _ in range(2)] == [202, 202]
    over = post(client, taken, {"kind": "summary"})
    assert over.status_code == 429 and int(over["Retry-After"]) > 0 and "2 times this hour" in over.json()["error"]
    client.force_login(make_user("alex", staff=True))
    assert post(client, taken, {"kind": "summary"}).status_code == 202
    assert len(copilot_queued) == 3 and CopilotRun.objects.count() == 3


def test_a_request_is_answered_202_with_the_run_queued(taken, sam, client, copilot_queued):
    client.force_login(sam)
    response = post(client, taken, {"kind": "ask", "question": "What is the refund limit?"})
    assert response.status_code == 202
    run = response.json()["copilot"]
    assert run["status"] == "queued" and run["question"] == "What is the refund limit?" and run["kind"] == "ask"
    assert copilot_queued == [CopilotRun.objects.get(public_id=run["id"]).pk]


def test_a_draft_of_another_person_or_another_conversation_is_not_sent(desk, queued, taken, sam, client):
    draft = ask(taken, sam, "draft")
    alex = make_user("alex", staff=True, first_name="Alex")
    client.force_login(alex)
    takeover.conversation_take_over(conversation=taken, user=alex)
    refused = reply(client, taken, draft.text, str(draft.public_id))
    assert refused.status_code == 403 and "someone else" in refused.json()["error"]
    other = handed_over(queued, desk.maya, sam, text="I want a full refund for order SU-41533, please.")
    client.force_login(sam)
    elsewhere = reply(client, other, draft.text, str(draft.public_id))
    assert elsewhere.status_code == 400 and "no copilot draft of this conversation" in elsewhere.json()["error"]
    assert reply(client, other, "hello", "not-an-id").status_code == 400
    assert not Message.objects.filter(author=Message.STAFF, content=draft.text).exists()
    draft.refresh_from_db()
    assert draft.sent_message is None and draft.edit_distance is None


def test_an_unfinished_draft_is_not_sent(taken, sam, client):
    queued_draft = copilot.copilot_start(conversation=taken, user=sam, kind="draft")
    client.force_login(sam)
    response = reply(client, taken, "Hello", str(queued_draft.public_id))
    assert response.status_code == 409 and "not finished" in response.json()["error"]


def test_a_suggested_refund_keeps_the_refund_actions_lead_permission_confirmation_and_second_approval(
        desk, queued, copilot_queued, settings, client):
    settings.SECOND_APPROVAL_ABOVE = "200.00"
    settings.STAFF_REFUND_CONFIRM_ABOVE = "100.00"
    sam = make_user("sam", staff=True, first_name="Sam")
    lee = make_user("lee", staff=True, group="leads", first_name="Lee")
    conversation = handed_over(queued, desk.maya, sam)
    suggestion = ask(conversation, sam, "suggest").suggestion
    assert suggestion["amount"] == "480.00"
    refund = {k: suggestion[k] for k in ("order_id", "amount", "reason")}
    url = f"/api/staff/conversations/{conversation.public_id}/refunds"
    client.force_login(sam)
    viewer = client.get(f"/api/staff/conversations/{conversation.public_id}/context").json()["viewer"]
    assert viewer["confirm_refund_above"] == "100.00"  # the console asks before sending 480.00
    agent = client.post(url, refund, content_type="application/json")
    assert agent.status_code == 403 and "need a support lead" in agent.json()["error"]
    client.force_login(lee)
    first = client.post(url, refund, content_type="application/json")
    assert first.status_code == 202 and first.json()["code"] == "needs_second_approver"
    assert StaffAction.objects.get(kind=StaffAction.REFUND, status=StaffAction.AWAITING_APPROVAL)
    desk.orders["SU-41533"].refresh_from_db()
    assert desk.orders["SU-41533"].refunds.count() == 0  # nothing made by the suggestion nor by one person


def test_the_settings_page_shows_whether_the_copilot_is_on_and_its_limits(db, client, settings):
    settings.COPILOT_ENABLED = False
    settings.COPILOT_PER_PERSON_PER_HOUR = 25
    client.force_login(make_user("lee", staff=True, group="leads"))
    page = client.get("/console/settings/").content.decode()
    group = re.search(r'data-group="copilot">.*?</h2>', page, re.S).group(0)
    assert ">Off<" in group
    assert "25" in re.search(r'data-name="COPILOT_PER_PERSON_PER_HOUR">.*?</tr>', page, re.S).group(0)


def test_with_redis_away_a_person_is_still_counted_in_the_process(taken, sam, client, settings, copilot_queued):
    from support.ops import limits
    from tests.redis_fixture import free_port

    settings.LIMITS_REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    settings.COPILOT_PER_PERSON_PER_HOUR = 2
    limits.process_windows.clear()
    client.force_login(sam)
    try:
        assert [post(client, taken, {"kind": "summary"}).status_code for _ in range(3)] == [202, 202, 429]
    finally:
        limits.process_windows.clear()
