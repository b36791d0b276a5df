"""The customer's language: the widget sets it on the conversation (POST /language, from the shop's data-lang
or the browser); the desk's fixed texts to the customer (the hand-over notices, a person joining, the
hand-back) are written in it (Django's catalogues, support/locale/); the model is told it on every run.

Who may: the conversation's own token only; another customer's token, or none, is a 404 and changes nothing.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.utils import translation

from support.agent.types import NOTE
from support.customers import identity, languages
from support.desk import assistant, runner, services, takeover
from support.desk.notices import ESCALATED as NOTICE_ESCALATED
from support.desk.notices import STOPPED as NOTICE_STOPPED
from support.models import Conversation, Message
from tests.desk_factories import start_conversation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sam():
    return get_user_model().objects.create_user("sam", password="pw", first_name="Sam", is_staff=True)


def set_language(client, conversation, language, token=None):
    token = identity.conversation_token(conversation) if token is None else token
    return client.post(f"/api/conversations/{conversation.public_id}/language", json.dumps({"language": language}),
                       content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def notices(conversation):
    return list(conversation.messages.filter(author=Message.SYSTEM, role="assistant").order_by("seq")
                .values_list("content", flat=True))


@pytest.mark.parametrize("tag, stored", [("de", "de"), ("de-AT", "de"), ("DE_ch", "de"), ("en-GB", "en")])
def test_the_widget_sets_the_conversations_language(client, demo, tag, stored):
    conversation = start_conversation(demo.maya)
    response = set_language(client, conversation, tag)
    assert response.status_code == 200 and response.json() == {"language": stored}
    conversation.refresh_from_db()
    assert conversation.language == stored


@pytest.mark.parametrize("tag", ["fr", "", "x" * 40, 12, None, ["de"]])
def test_a_language_the_desk_does_not_speak_is_refused_and_nothing_changes(client, demo, tag):
    conversation = start_conversation(demo.maya)
    response = set_language(client, conversation, tag)
    assert response.status_code == 400 and response.json()["code"] == "invalid_request"
    assert response.json()["error"] == "language must be one of: en, de."
    conversation.refresh_from_db()
    assert conversation.language == "en"


def test_you_may_not_set_another_customers_language(client, demo):
    maya = start_conversation(demo.maya)
    toms_token = identity.conversation_token(start_conversation(demo.tom))
    assert set_language(client, maya, "de", token=toms_token).status_code == 404
    assert set_language(client, maya, "de", token="").status_code == 404
    maya.refresh_from_db()
    assert maya.language == "en"


def test_a_person_joining_and_handing_back_is_told_in_the_customers_language(demo, sam):
    conversation = start_conversation(demo.maya)
    Conversation.objects.filter(pk=conversation.pk).update(language="de")
    conversation.refresh_from_db()
    takeover.conversation_take_over(conversation=conversation, user=sam)
    takeover.conversation_hand_back(conversation=conversation, user=sam)
    assert notices(conversation) == [
        "Sam aus unserem Team ist dem Gespräch beigetreten.",
        "Sam aus unserem Team hat sich um das Gespräch oben gekümmert und es an unseren Assistenten "
        "zurückgegeben, der alles beantwortet, was Sie hier neu schreiben.",
    ]


def test_an_english_customer_reads_the_english_notices(demo, sam):
    conversation = start_conversation(demo.maya)
    with translation.override("de"):  # whatever the server's own language at the time
        takeover.conversation_take_over(conversation=conversation, user=sam)
    assert notices(conversation) == ["Sam from our team has joined the conversation."]


def test_every_fixed_text_has_a_german_translation():
    conversation = Conversation(language="de")
    for text in (NOTICE_ESCALATED, NOTICE_STOPPED):
        assert languages.say(conversation, text) != str(text)
    assert takeover.joined_notice(None, conversation=conversation) == "Jemand aus unserem Team ist dem Gespräch beigetreten."
    assert takeover.handed_back_notice(None, joined=False, conversation=conversation).startswith("Unser Assistent")


def test_a_refund_a_person_issues_is_told_in_the_customers_language(demo, sam):
    from support.desk import staff_actions

    conversation = start_conversation(demo.maya)
    Conversation.objects.filter(pk=conversation.pk).update(language="de")
    conversation.refresh_from_db()
    from support.desk import permissions

    sam.groups.add(permissions.ensure_groups()[permissions.AGENTS])  # agents may refund up to their limit
    action = staff_actions.refund_issue(conversation=conversation, user=sam, order_id="SU-41310", amount="10.00",
                                        reason="goodwill")
    notice = conversation.messages.filter(author=Message.SYSTEM).last().content
    assert notice.startswith("Wir haben 10.00 EUR für die Bestellung SU-41310") and action.result["reference"] in notice


def test_a_hand_over_is_announced_in_german_and_the_model_is_told_the_language(desk, queued, client,
                                                                                 monkeypatch):
    conversation = services.conversation_start(customer=desk.maya)
    assert set_language(client, conversation, "de").status_code == 200
    services.conversation_post_message(conversation=conversation, text="I want a full refund for order SU-41533.")
    sent = []
    model = assistant.shared_model()
    original = model.complete

    def complete(transcript, tools, sink):
        sent.append([dict(m) for m in transcript.messages])
        return original(transcript, tools, sink)

    monkeypatch.setattr(model, "complete", complete)
    assert runner.run_execute(queued.pop()) == "escalated"
    line = "The customer's language is German (de). Write every answer to the customer in German"
    assert sent and all(r[1]["role"] == "system" and r[1]["content"].startswith(line) for r in sent)
    assert notices(conversation)[-1] == ("Ich habe Ihr Anliegen an unser Support-Team weitergegeben. Jemand aus "
                                         "unserem Team antwortet Ihnen hier.")
    # The line is read from the conversation on every run, never saved as a message.
    assert not conversation.messages.filter(content__startswith="The customer's language").exists()


def test_an_english_conversation_tells_the_model_english(desk, queued, monkeypatch):
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    sent = []
    model = assistant.shared_model()
    original = model.complete
    monkeypatch.setattr(model, "complete", lambda t, tools, sink: sent.append(list(t.messages)) or original(t, tools, sink))
    runner.run_execute(queued.pop())
    assert sent[0][1]["content"].startswith("The customer's language is English (en).")
    # After it the customer's words, then the run's note (its time, the orders the desk knows).
    assert sent[0][0]["role"] == "system" and sent[0][-2]["role"] == "user" and sent[0][-1][NOTE]
    assert [m["role"] for m in sent[0]].index("user") >= 2
