"""The customer's satisfaction rating of a conversation: one per conversation, changeable, shown to staff."""

from django.db import models
from django.db.models import Q

from .desk import Conversation


class Rating(models.Model):
    """1 to 5 and an optional comment, given when the agent resolved the question or staff closed it.

    One row per conversation: rating again changes it (updated_at says when), it never adds a second."""

    RESOLVED, CLOSED = "resolved", "closed"  # what the widget offered it after
    OCCASIONS = [(RESOLVED, "resolved by the agent"), (CLOSED, "closed by staff")]
    MAX_COMMENT = 1000  # characters

    conversation = models.OneToOneField(Conversation, on_delete=models.CASCADE, related_name="rating")
    score = models.PositiveSmallIntegerField()
    comment = models.TextField(blank=True)
    occasion = models.CharField(max_length=10, choices=OCCASIONS)
    rated_seq = models.PositiveIntegerField(default=0)  # the conversation's last seq when rated
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(score__gte=1, score__lte=5), name="rating_score_1_to_5")]

    def __str__(self) -> str:
        return f"{self.score}/5 for conversation {self.conversation_id}"
