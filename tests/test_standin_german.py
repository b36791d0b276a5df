"""The stand-in answers in German when the desk tells it the customer's language is German (the line of
support/customers/languages.py), as a model does: the sentences customers meet most, dates and "hours ago" too;
told nothing, it answers in English."""

from __future__ import annotations

import pytest

from standin import german
from support.desk import runner, services
from support.models import Conversation, Message
from tests.standin_fixture import standin  # noqa: F401


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
