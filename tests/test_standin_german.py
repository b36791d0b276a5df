"""The stand-in answers in German when the desk tells it the customer's language is German (the line of
support/customers/languages.py), as a model does: the sentences customers meet most, dates and "hours ago" too;
told nothing, it answers in English."""

from __future__ import annotations

import re

import pytest

from standin import german
from standin.conversation import intent
from standin.reply import declined_answer
from support.desk import runner, services
from support.models import Conversation, Message
from standin.scenarios import SPIN
from tests.standin_fixture import S, SYSTEM, TOOLS, FakeShop, _tool, client_for, run_ticket, standin  # noqa: F401


def test_where_a_parcel_is_reads_as_german_with_german_dates():
    said = german.translate('Order SU-41620 is on its way with DX Freight (tracking DX81620061). The latest scan is '
                            '"Arrived at sorting centre Leeds" at Leeds on Wed 02 Dec at 14:00 your time, 18 hours ago.')
    assert said == ("Ihre Bestellung SU-41620 ist mit DX Freight unterwegs (Sendungsnummer DX81620061). Der letzte "
                    "Scan lautet „Arrived at sorting centre Leeds“ in Leeds am Mi, 2. Dez. um 14:00 Ihre Ortszeit, "
                    "vor 18 Stunden.")


def test_which_order_names_the_orders_in_german():
    said = german.translate("I'd be glad to help. Is it about SU-41501 (placed 2026-11-30, in transit) or SU-41210 "
                            "(placed 2026-11-29, delivered)? If it's another order, send me its order number; it "
                            "starts with \"SU-\".")
    assert said.startswith("Gern helfe ich Ihnen. Geht es um SU-41501 (bestellt am 2026-11-30, unterwegs) oder "
                           "SU-41210 (bestellt am 2026-11-29, zugestellt)?")


def test_a_sentence_it_does_not_know_stays_as_it_was():
    assert german.translate("Something else entirely.") == "Something else entirely."
    assert german.translate(None) is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("language, words", [("de", "Laut"), ("en", "shows order")])
def test_a_run_answers_in_the_conversation_s_language(desk, queued, language, words):
    conversation = services.conversation_start(customer=desk.maya)
    Conversation.objects.filter(pk=conversation.pk).update(language=language)
    services.conversation_post_message(conversation=conversation, text="Wo ist meine Bestellung SU-41210?")
    assert runner.run_execute(queued.pop()) == "answered"
    answer = conversation.messages.filter(author=Message.AGENT).last().content
    assert words in answer and "SU-41210" in answer


# -- the missing-parcel flow, and what staff said, in German ------------------------------------------------------

@pytest.mark.parametrize("words", [
    "Nichts ist angekommen, Bestellung SU-41310.",
    "Bei mir ist nichts angekommen.",
    "Das Paket ist nie angekommen.",
    "Ich habe das Paket nicht bekommen.",
    "Die Sendung wurde nicht zugestellt, obwohl es so angezeigt wird.",
    "Meine Lieferung ist nicht eingetroffen.",
    "Das Paket kam nie an.",
    "Es ist kein Paket da, obwohl zugestellt steht.",
])
def test_german_phrasings_of_a_missing_parcel_play_the_missing_parcel_scenario(words):
    assert intent(words) == "missing"


@pytest.mark.parametrize("words", ["Wo ist meine Bestellung SU-41210?", "Wann kommt mein Paket?"])
def test_a_german_question_where_a_parcel_is_stays_a_status_question(words):
    assert intent(words) == "status"


def test_a_declined_refund_quotes_the_persons_reason_as_written_with_a_note_in_german():
    reason = "Laut DPD am Wed 02 Dec at 14:00 your time zugestellt, 3 hours ago. I'm sorry"
    said = german.translate("DPD shows order SU-41402 as delivered: \"Delivered\" on Wed 02 Dec at 14:00 your time, "
                            "3 hours ago. " + declined_answer("a refund of 64.00 EUR", reason))
    assert f"Unser Team schreibt dazu: „{reason}.“" in said  # word for word: nothing in it translated
    assert said.startswith("Laut DPD wurde die Bestellung SU-41402 zugestellt")
    assert "Ich habe unser Team gebeten, eine Erstattung von 64.00 EUR zu genehmigen" in said
    assert english_left(said.replace(reason, "")) == []


@pytest.mark.parametrize("english", [
    'DX Freight recorded your parcel for order SU-41310 as delivered: "Delivered: left in porch" on Mon 30 Nov at '
    "10:00 your time, 50 hours ago. Our policy is that a missing-parcel claim can be opened 48 hours after the "
    "delivered scan, and 50 hours have passed, within the 30-day claim window. I've refunded 64.00 EUR to your "
    "original payment method (refund reference RF-1A2B).",
    'Royal Mail recorded your parcel for order SU-41419 as delivered: "Delivered" on Wed 02 Dec at 10:00 your time, '
    "20 hours ago. Hearth & Loom's policy is that a missing-parcel claim can be opened once 48 hours have passed "
    "since the delivered scan, and it has been 20 hours so far. I've messaged Hearth & Loom and asked them to open "
    "a claim with the carrier as soon as the 48 hours have passed, in about 28 hours. If the parcel still hasn't "
    "turned up by then, the claim can go ahead and you can be refunded up to 79.00 EUR.",
    'Royal Mail recorded your parcel for order SU-40155 as delivered: "Delivered" on Wed 21 Oct at 10:00 your time, '
    "45 days ago (1080 hours). Our policy is that a missing-parcel claim must be opened within 30 days of the "
    "delivery scan. That scan was 45 days ago, so I'm sorry, but I can't open a claim or refund this order any more.",
    "Order SU-41501 is on its way with Evri (tracking EV1). The latest scan is \"In transit\" at Wakefield on Fri 04 "
    "Dec at 07:44 your time, 3 hours ago. The carrier hasn't marked it as delivered yet, so it is still on its way "
    "to you.",
    "I asked our team to approve a refund of 64.00 EUR, but it couldn't be reviewed in time, so nothing has been "
    "refunded yet. A member of our team will follow up with you here.",
    'DX Freight recorded your parcel for order SU-41310 as delivered: "Delivered" on Mon 30 Nov at 10:00 your time, '
    "50 hours ago. This is more than I'm allowed to approve myself, so I've passed your request with all the "
    "details to a specialist on our team. They'll get back to you here.",
    "I couldn't find an order SU-99999 on your account. Could you check the number in your confirmation email and "
    "send it again? If the order was placed from another account, please write to us from that account.",
])
def test_every_answer_of_the_missing_parcel_scenario_reads_in_german(english):
    said = german.translate(english)
    assert english_left(said) == [], said


def english_left(text: str) -> list[str]:
    """English words a German answer should not have (quoted scans and names aside)."""
    text = re.sub(r"„[^“]*“", "", text)
    return [w for w in re.findall(r"[A-Za-z']+", text) if w.lower() in ENGLISH]


ENGLISH = {"the", "your", "you", "order", "our", "is", "and", "it", "has", "have", "was", "i've", "i'm", "to",
           "of", "on", "as", "policy", "refund", "refunded", "claim", "hours", "days", "ago", "but",
           "so", "this", "that", "they", "here", "with", "delivered", "please", "if", "time", "at"}


@pytest.mark.django_db(transaction=True)
def test_a_german_missing_parcel_ends_in_german_with_the_reviewers_words_as_written(desk, queued):
    from django.contrib.auth import get_user_model

    from support.desk import gate
    from support.models import Approval

    conversation = services.conversation_start(customer=desk.maya)
    Conversation.objects.filter(pk=conversation.pk).update(language="de")
    services.conversation_post_message(conversation=conversation, text="Nichts ist angekommen, Bestellung SU-41310.")
    assert runner.run_execute(queued.pop()) == "awaiting_approval"  # the missing-parcel refund, not a status
    asked = conversation.messages.filter(author=Message.AGENT).last().content
    assert asked.startswith("Ich habe unser Team gebeten, eine Erstattung von 64.00 EUR") and english_left(asked) == []
    lead = get_user_model().objects.create_user("lead", password="x", is_staff=True, is_superuser=True)
    reason = "The carrier found the parcel at the depot; it goes out again tomorrow"
    gate.approval_decide(approval=Approval.objects.get(run__conversation=conversation), user=lead,
                         approve=False, reason=reason)
    runner.run_execute(queued.pop())
    answer = conversation.messages.filter(author=Message.AGENT).last().content
    assert f"Unser Team schreibt dazu: „{reason}.“" in answer
    assert english_left(answer.replace(reason, "")) == [], answer


# -- every flow of the stand-in, played in German over HTTP ----------------------------------------------------
GERMAN = [{"role": "system", "content": SYSTEM + "\nThe customer's language is German (de)."}]
CREDIT_RULE = [{"role": "system", "content": GERMAN[0]["content"] + "\nOffer store credit before a refund under "
                                                                   "100 EUR."}]
WARRANTY = TOOLS + [_tool("lookup_warranty", order_number=S), _tool("issue_store_credit", order_number=S, amount=S,
                                                                    note=S)]


def played(standin, *said: str, shop=None, tools=TOOLS, system=GERMAN):
    """Every answer the stand-in wrote to the customer over the turns `said` (what it says while a call waits
    for a person included)."""
    client, messages = client_for(standin), list(system)
    for text in said:
        messages = run_ticket(client, text, shop or FakeShop(), tools=tools, messages=messages).messages
    return [m["content"] for m in messages if m.get("role") == "assistant" and m.get("content")]


def warranty_shop(**kwargs):
    from tests.test_standin_services import WarrantyShop
    return WarrantyShop(**kwargs)


PLAYS = {
    "porch, 48 hours": ("Tracking says delivered but there is nothing here. Order SU-41207.",),
    "missing, refunded": ("My parcel SU-41310 never came.",),
    "outside the claim window": ("Order SU-40155 was never delivered to me",),
    "weather delay, fee refunded": ("Where is my order SU-41388? It's very late.",),
    "damaged, refunded": ("My order SU-41402 arrived but the screen is cracked.",),
    "damaged, photo asked for": ("I have a photo: my order SU-41402 arrived cracked.",),
    "wrong item from a seller": ("I got a blue throw instead of the grey one I ordered (SU-41419).",),
    "wrong item from the warehouse": ("You sent me the wrong item in SU-41210.",),
    "over the ceiling": ("I want a refund for SU-41533 please.",),
    "the rest of the balance": ("Can I have the rest of my money back for SU-41290?",),
    "in transit": ("Where is my order SU-41501?",),
    "a refund before it arrived": ("I want a refund for SU-41501.",),
    "delivered status": ("Has SU-41210 arrived?",),
    "not theirs": ("Where is my order SU-41444?",),
    "no such order": ("Where is my order SU-99999?",),
    "thanks": ("Has SU-41210 arrived?", "Thanks!"),
    "order number later": ("Hello, my parcel hasn't arrived", "It's SU-41310."),
    "not understood twice": ("Do you sell gift cards?", "One for my sister's birthday, fifty euros."),
    "not understood after an answer": ("Has SU-41210 arrived?", "Do you sell gift cards?"),
}


@pytest.mark.parametrize("said", PLAYS.values(), ids=PLAYS.keys())
def test_every_flow_of_the_stand_in_answers_in_german(standin, said):
    for answer in played(standin, *said):
        assert english_left(answer) == [], answer


@pytest.mark.parametrize("shop", [{"reject": {"issue_refund": "the parcel was found at the depot"}}, {}])
def test_a_refund_staff_declined_and_asked_for_again_is_handed_over_in_german(standin, shop):
    answers = played(standin, "My parcel SU-41310 never came.", "I still want my refund for SU-41310.",
                     shop=FakeShop(**shop))
    assert all(english_left(a.replace("the parcel was found at the depot", "")) == [] for a in answers), answers


@pytest.mark.parametrize("said, shop", [
    ("Is my speaker from order SU-41402 still under warranty?", {}),
    ("The kettle from SU-41210 stopped working. Could I have 18 EUR store credit instead?", {}),
    ("Can I get store credit for SU-41210? It stopped working.",
     {"reject": {"issue_store_credit": "the kettle has to come back to our warehouse first"}}),
    ("Can I get store credit for SU-41210? It stopped working.",
     {"credit_answer": "ERROR: not confirmed: issue_store_credit 18.00 on SU-41210 may have run."}),
    ("Can I get store credit for SU-41210? It stopped working.", {"credit_answer": "ERROR: the service is down"}),
])
def test_the_warranty_services_flows_answer_in_german_quoting_the_service(standin, said, shop):
    for answer in played(standin, said, shop=warranty_shop(**shop), tools=WARRANTY):
        assert english_left(answer.replace("the kettle has to come back to our warehouse first", "")) == [], answer


def test_store_credit_offered_first_reads_in_german_and_is_offered_once(standin):
    answers = played(standin, "I want my money back for SU-41290.", "No, I still want the refund.",
                     system=CREDIT_RULE)
    assert "ein Guthaben von 80.00 EUR anbieten" in answers[0]
    assert sum("Guthaben" in a for a in answers) == 1 and "Ich habe Ihnen 80.00 EUR" in answers[-1], answers
    assert all(english_left(a) == [] for a in answers), answers


def test_an_order_number_given_when_asked_in_german_carries_on_the_request(standin):
    client, messages = client_for(standin), list(GERMAN)
    first = run_ticket(client, "Mein Paket ist nie angekommen.", messages=messages)
    then = run_ticket(client, "SU-41310", messages=first.messages)
    assert then.names == ["get_order", "track_parcel", "search_policy", "issue_refund", "record_outcome"]


def test_a_staff_note_on_another_amount_is_quoted_as_written_after_a_german_note():
    note = "Only the cover was missing, so half the price"
    said = german.translate("I asked our team to approve a refund of 64.00 EUR; after reviewing it they approved "
                            "32.00 EUR, so I've refunded 32.00 EUR to your original payment method. Our team's note: "
                            f"{note}. If you think the amount isn't right, just reply here and a member of our team "
                            "will look at it again.")
    assert f"Unser Team schreibt dazu: „{note}.“" in said and english_left(said.replace(note, "")) == [], said


@pytest.mark.parametrize("english", [
    SPIN, "I checked our policies 3 times. Everything is in order.",
    "Your order SU-1 has been placed and hasn't shipped yet. I'll be here if you need anything else about it.",
    "Your order SU-1 was cancelled. I'll be here if you need anything else about it.",
    "I'm sorry, I couldn't pass your question to a member of our team just now. Please write to us again later, or "
    "tell me which order your question is about.",
    "Order SU-1 came to 20.00 EUR and 20.00 EUR has already been refunded, so 0.00 EUR is left to refund. It has "
    "already been refunded in full, so there is nothing more I can refund.",
    "I couldn't reach our warranty service to check the warranty for order SU-1 just now. A member of our team will "
    "check and follow up with you here.",
    "Order SU-1 has already been refunded in full, so there is nothing left to give as store credit.",
])
def test_the_answers_no_demo_ticket_reaches_read_in_german_too(english):
    said = german.translate(english)
    assert english_left(said) == [], said
