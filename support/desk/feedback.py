"""What the customer tells us besides messages, and what we tell them besides messages: their rating of a
conversation, their language, a person typing, a staff close. Writes and the events they publish.

Ratings: offered once the matter is done: a staff member closed the conversation (and the customer has not
written since), or the agent resolved the question (the latest run answered with outcome `resolved`) with
nothing left to happen, never right after an answer that leaves a claim open (the seller was asked to act:
open a claim with the carrier, send a return label). One per conversation, changeable (rating again updates
it). Staff see them in the inbox row and on the conversation page.
"""

from __future__ import annotations

import unicodedata

from django.db import transaction

from support.agent import types as agent
from support.customers import cleaning, languages
from support.desk import serializers
from support.live import events
from support.models import Conversation, Rating, Run, ToolCall
from support.tools.sellers import MESSAGE_SELLER


class InvalidFeedback(ValueError):
    """Refused input; the text says why in plain words, `code` says it to a program."""

    def __init__(self, message: str, code: str = "invalid_request"):
        super().__init__(message)
        self.code = code


class NotRatable(Exception):
    pass


# -- the rating -------------------------------------------------------------------------------------------

def rating_occasion(conversation: Conversation) -> str | None:
    """Why the customer may rate the conversation now (Rating.CLOSED or RESOLVED), or None."""
    conversation.refresh_from_db(fields=["closed_at", "status"])
    if conversation.is_closed():
        return Rating.CLOSED
    run = Run.objects.filter(conversation=conversation).order_by("-created_at", "-pk").first()
    if (conversation.status == Conversation.OPEN and run is not None and run.status == Run.STOPPED
            and run.stop_reason == agent.ANSWERED and run.outcome == "resolved" and not leaves_claim_open(run)):
        return Rating.RESOLVED
    return None


def leaves_claim_open(run: Run) -> bool:
    """Whether the run's answer leaves something still to happen: it asked the seller to act (the agent's
    outcome may say `resolved` of its own turn while the customer still waits for the claim or the label)."""
    return ToolCall.objects.filter(run=run, name=MESSAGE_SELLER.name, status=ToolCall.EXECUTED).exists()


def rating_of(conversation: Conversation) -> Rating | None:
    return Rating.objects.filter(conversation=conversation).first()


def rating_json(rating: Rating | None) -> dict | None:
    if rating is None:
        return None
    return {"score": rating.score, "comment": rating.comment, "occasion": rating.occasion,
            "rated_seq": rating.rated_seq, "created_at": serializers._ts(rating.created_at),
            "updated_at": serializers._ts(rating.updated_at)}


def _score(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise InvalidFeedback("Choose a rating from 1 to 5 stars.", code="invalid_score")
    return value


def _comment(value) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or not cleaning.is_valid_unicode(value):
        raise InvalidFeedback("Your comment must be text.", code="invalid_comment")
    text = cleaning.without_bidi_controls(unicodedata.normalize("NFC", value.replace("\r\n", "\n"))).strip()
    if cleaning.first_forbidden(text) is not None:
        raise InvalidFeedback("Your comment contains a character we cannot show; please remove it.",
                              code="invalid_comment")
    if len(text) > Rating.MAX_COMMENT:
        raise InvalidFeedback(f"Your comment is too long \u2014 please keep it under {Rating.MAX_COMMENT:,} "
                              "characters.", code="comment_too_long")
    return text


def rating_save(*, conversation: Conversation, score, comment=None) -> tuple[Rating, bool]:
    """Save the customer's rating (or change it): (rating, created). NotRatable when there is nothing to
    rate yet (neither resolved nor closed, and never rated)."""
    score, comment = _score(score), _comment(comment)
    occasion = rating_occasion(conversation)
    with transaction.atomic():
        # The conversation's row serialises two tabs rating at once: one row, the later score.
        last_seq = Conversation.objects.select_for_update().values_list("last_seq", flat=True).get(pk=conversation.pk)
        rating = Rating.objects.filter(conversation=conversation).first()
        if rating is None and occasion is None:
            raise NotRatable()
        fields = {"score": score, "comment": comment, "rated_seq": last_seq}
        if occasion is not None:
            fields["occasion"] = occasion
        rating, created = Rating.objects.update_or_create(conversation=conversation, defaults=fields)
        transaction.on_commit(lambda: publish_rated(conversation, rating))
    return rating, created


def publish_rated(conversation: Conversation, rating: Rating) -> None:
    """conversation.rated, to the consoles: the inbox row and the conversation page show it."""
    event = {"type": "conversation.rated", "conversation": str(conversation.public_id),
             "seq": conversation.last_seq, "rating": rating_json(rating)}
    events.publisher.send([events.STAFF_GROUP, events.staff_conversation_group(conversation.public_id)], event)


def publish_closed(conversation: Conversation) -> None:
    """conversation.closed, to the customer's widget: it offers the rating. Sent after a staff close commits."""
    event = {"type": "conversation.closed", "conversation": str(conversation.public_id),
             "seq": conversation.last_seq}
    events.publisher.send([events.conversation_group(conversation.public_id)], event)


# -- the customer's language --------------------------------------------------------------------------------

def language_set(*, conversation: Conversation, language) -> str:
    code = languages.language_code(language)
    if code is None:
        raise InvalidFeedback(f"language must be one of: {', '.join(languages.supported())}.",
                              code="unsupported_language")
    Conversation.objects.filter(pk=conversation.pk).exclude(language=code).update(language=code)
    conversation.language = code
    return code


# -- a person typing ------------------------------------------------------------------------------------------

def typing_publish(*, conversation: Conversation, user) -> dict:
    """staff.typing to the customer's widget ("Sam is typing…"); the console sends it at most every few
    seconds while its reply box changes. Nothing is saved: a lost one only shortens the indicator."""
    event = {"type": "staff.typing", "conversation": str(conversation.public_id), "seq": conversation.last_seq,
             "name": serializers.staff_name(user) or ""}
    events.publisher.send([events.conversation_group(conversation.public_id)], event)
    return event
