"""Writes of a staff member working a conversation: refunds, messages to the seller, internal notes, saved
replies. Every rule is checked here, in server code, whatever the console offers.

A person acts under the agent's rules where the agent has them (support/tools/): the order must be the
conversation customer's and within the conversation's order scope (a conversation opened with one order acts
on that order only, as its tools do), a refund never exceeds the order's refundable balance (checked again
by the shop as it writes, the demo under the order's row lock), a seller message goes through the agent's own tool (Sundry-fulfilled orders
have no seller, the conversation's daily limit, the same text sent once). What a person does not need is the
agent's approval step: they are the person. Above the agent's limits a person needs the higher permission:

  - issuing a refund at all needs `support.decide_approval` (the right to approve the agent's refunds);
  - a refund above LARGE_REFUND_THRESHOLD, or above the agent's ceiling (the profile's, capped by REFUND_CEILING), needs
    `support.approve_large_refund` too, as approving the agent's would (support/desk/permissions.py);
  - a refund above SECOND_APPROVAL_ABOVE waits for another person's approval (four eyes): saved with an
    Approval, made when someone else approves it (gate.approval_decide calls refund_approved).

Every action is written with who, when, what was asked and what came of it (StaffAction), in the transaction
that does it, refusals included; a double click or a retried request with the same key does it once.
Lock order (see services.py): an action locks the order's row (the demo shop does, in this transaction), then
appends to the conversation (its row), as the agent's refund does (order, then the run, then the conversation);
nothing here locks a run.
"""

from __future__ import annotations

import unicodedata
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.translation import gettext_lazy as _

from support import profiles
from support.agent.tools import ToolContext, ToolError
from support.customers import cleaning, languages
from support.customers.words import staff_name
from support.desk import permissions, routing, serializers, services
from support.live import events
from support.models import Approval, Conversation, Message, Note, SavedReply, StaffAction
from support.shop import effects, port, shop
from support.tools.common import money, order_for_customer, parse_amount
from support.tools.sellers import message_seller

NOTE_MAX_CHARS = 4000
REPLY_TITLE_MAX = 80


class ActionRefused(Exception):
    """The action was not done; `status` is the HTTP status that says why (400, 403, 404, 409)."""

    status = 400

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        if status is not None:
            self.status = status


def _ctx(conversation: Conversation) -> ToolContext:
    # The conversation's id makes the tools apply its order scope and its per-conversation limits.
    return ToolContext(customer_id=conversation.customer_id, conversation_id=str(conversation.public_id))


def _key(user, conversation: Conversation, kind: str, key) -> str | None:
    """The stored idempotency key, in the namespace of the person, the conversation and the kind of action:
    a key sent again names that one action, never one someone else took, on another conversation, or of
    another kind (which a key looked up across them would hand back, and never do)."""
    if key is None:
        return None
    if not isinstance(key, str) or not cleaning.CLIENT_ID.fullmatch(key):
        raise ActionRefused("key must be 1 to 64 letters, digits or . _ : -")
    return f"{user.pk}:{conversation.pk}:{kind}:{key}"


def _earlier(conversation: Conversation, full_key: str | None) -> StaffAction | None:
    """The action this key already named, looked up on this conversation only (and of this kind: an action
    saved before keys named the conversation and the kind, "<user>:<key>", is found by that form too)."""
    if not full_key:
        return None
    user, _, kind, key = full_key.split(":", 3)
    return (StaffAction.objects.filter(conversation=conversation, kind=kind,
                                       idempotency_key__in=(full_key, f"{user}:{key}")).first())


def _text(value, field: str, max_chars: int) -> str:
    """Staff-written text, cleaned as a customer's is: no control characters, no bidi overrides, not blank."""
    if not isinstance(value, str) or not cleaning.is_valid_unicode(value):
        raise ActionRefused(f"{field} must be text.")
    text = cleaning.without_bidi_controls(unicodedata.normalize("NFC", value.replace("\r\n", "\n"))).strip()
    if cleaning.is_blank(text):
        raise ActionRefused(f"Write the {field} first.")
    if cleaning.first_forbidden(text) is not None:
        raise ActionRefused(f"The {field} contains a control character; please remove it.")
    if len(text) > max_chars:
        raise ActionRefused(f"The {field} is too long: keep it under {max_chars} characters.")
    return text


def _publish_action(conversation: Conversation, action: StaffAction) -> None:
    def send():
        conversation.refresh_from_db(fields=["last_seq"])
        events.publisher.send([events.staff_conversation_group(conversation.public_id)], {
            "type": "staff.action", "conversation": str(conversation.public_id), "seq": conversation.last_seq,
            "action": serializers.staff_action_json(action)})
    transaction.on_commit(send)


def _refused(conversation, user, kind: str, arguments: dict, error: ActionRefused) -> ActionRefused:
    """Put a refusal on record (no key: the person may fix the request and send it again), and return it."""
    action = StaffAction.objects.create(conversation=conversation, user=user, kind=kind, arguments=arguments,
                                        status=StaffAction.REFUSED, result={"error": str(error)})
    _publish_action(conversation, action)
    return error


# -- refunds ----------------------------------------------------------------------------------------------

def refund_limit(user, order: port.Order | None = None) -> Decimal | None:
    """The most this person may refund at once (None: they may not refund); the order's balance binds too."""
    if not user.has_perm(permissions.DECIDE_APPROVAL):
        return None
    if user.has_perm(permissions.APPROVE_LARGE_REFUND):
        return order.refundable if order is not None else None
    return _agent_level_limit()


def _agent_level_limit() -> Decimal:
    """Without the large-refund permission a person refunds what the agent may: up to the agent's ceiling (the
    live profile's, within REFUND_CEILING) and LARGE_REFUND_THRESHOLD, whichever is lower."""
    return min(profiles.effective_limits().refund_ceiling, permissions.large_refund_threshold())


def _refund_refusal(user, value: Decimal) -> ActionRefused | None:
    if not user.has_perm(permissions.DECIDE_APPROVAL):
        return ActionRefused("Your account may not issue refunds: that needs the permission to decide approvals "
                             f"({permissions.DECIDE_APPROVAL}), which the {permissions.AGENTS} and "
                             f"{permissions.LEADS} groups have.", 403)
    limit = _agent_level_limit()
    if value > limit and not user.has_perm(permissions.APPROVE_LARGE_REFUND):
        return ActionRefused(f"Refunds above {money(limit)} EUR need a support lead (permission "
                             f"{permissions.APPROVE_LARGE_REFUND}, group {permissions.LEADS}). Issue up to "
                             f"{money(limit)} EUR, or ask a lead.", 403)
    return None


REFUND_NOTICE = _("We've refunded %(amount)s %(currency)s on order %(order)s to your original payment method. "
                  "It usually shows within 5 business days.")
REFUND_NOTICE_WITH_REFERENCE = _("We've refunded %(amount)s %(currency)s on order %(order)s to your original "
                                 "payment method (refund reference %(reference)s). It usually shows within 5 "
                                 "business days.")


def refund_notice(amount: Decimal, order: port.Order, reference: str = "",
                  conversation: Conversation | None = None) -> str:
    """What the customer (and the model) read when a person refunds: the amount in plain words, in the
    conversation's language."""
    return languages.say(conversation, REFUND_NOTICE_WITH_REFERENCE if reference else REFUND_NOTICE,
                         amount=money(amount), currency=order.currency, order=order.number, reference=reference)


def refund_issue(*, conversation: Conversation, user, order_id, amount, reason, key=None) -> StaffAction:
    """A refund by a staff member, on record, told to the customer in the transcript. ActionRefused when not
    allowed (the refusal is on record too).

    The intent is saved first (a pending action with its key); then the shop is asked, with a key made of
    it, so a request repeated after a crash or a lost answer (the same client key) finds the shop's refund
    instead of making another (support/shop/effects.py)."""
    arguments = {"order_id": order_id, "amount": amount, "reason": reason}
    full_key = _key(user, conversation, StaffAction.REFUND, key)
    earlier = _earlier(conversation, full_key)
    if earlier is not None and earlier.status != StaffAction.PENDING:
        return earlier  # the same request again (a double click, a retry): done once
    try:
        reason = _text(reason, "reason", 500)
        value = parse_amount(amount)
        order = order_for_customer(_ctx(conversation), order_id)
    except ToolError as error:
        raise _refused(conversation, user, StaffAction.REFUND, arguments, ActionRefused(str(error))) from None
    except ActionRefused as error:
        raise _refused(conversation, user, StaffAction.REFUND, arguments, error) from None
    refusal = _refund_refusal(user, value)
    if refusal is not None:
        raise _refused(conversation, user, StaffAction.REFUND, arguments, refusal)
    if earlier is None and permissions.needs_second_approver(Approval.STAFF_REFUND, {"amount": value}):
        return _ask_second_person(conversation, user, arguments, full_key,
                                  {"order_id": order.number, "amount": money(value), "reason": reason})
    action = earlier or _intent(conversation, user, StaffAction.REFUND, arguments, full_key)
    if action.status != StaffAction.PENDING:
        return action  # the same request, saved by another while this one looked
    try:
        return _refund_now(action, order, value, reason)
    except ActionRefused as error:
        _refuse_intent(action, error)
        raise
    except port.ShopUnavailable as away:
        raise _shop_away(action, away, "refund") from None


def _refund_now(action: StaffAction, order: port.Order, value: Decimal, reason: str) -> StaffAction:
    """The refund of a pending action, made at the shop and told to the customer; the action as it ends."""
    conversation = action.conversation
    with transaction.atomic():
        locked = StaffAction.objects.select_for_update().get(pk=action.pk)
        if locked.status != StaffAction.PENDING:
            return locked  # the same request, finished while this one waited for it
        # The shop checks the balance as it writes (two refunds cannot share a balance), and answers the
        # same key with the refund it already made.
        refund = _shop_refund(order, value, reason, _shop_key(locked), conversation)
        left = shop().order(order.number).refundable
        locked.status = StaffAction.DONE
        locked.result = {"refund_id": refund.id, "reference": refund.reference, "order_id": order.number,
                         "amount": money(refund.amount), "refundable_remaining": money(left)}
        locked.save(update_fields=["status", "result"])
        services.message_append(conversation=conversation, author=Message.SYSTEM, user=locked.user,
                                wire={"role": "assistant", "content": refund_notice(
                                    refund.amount, order, refund.reference, conversation)})
        _publish_action(conversation, locked)
    return locked


# -- four eyes: a refund above SECOND_APPROVAL_ABOVE waits for another person (support/desk/four_eyes.py) --

def _ask_second_person(conversation: Conversation, user, arguments: dict, full_key: str | None,
                       requested: dict) -> StaffAction:
    """The refund saved as asked, with an approval another person gives or refuses in the approvals queue;
    nothing reaches the shop before. The same key sent meanwhile by another request is that request's."""
    try:
        with transaction.atomic():
            action = StaffAction.objects.create(conversation=conversation, user=user, kind=StaffAction.REFUND,
                                                arguments=arguments, status=StaffAction.AWAITING_APPROVAL,
                                                idempotency_key=full_key)
            approval = Approval.objects.create(staff_action=action, requested_by=user, requested_arguments=requested)
            routing.approval_route(approval=approval)  # another online person's queue (never the asker's)
            _publish_action(conversation, action)
            transaction.on_commit(lambda: serializers.publish_approval(approval))
    except IntegrityError:
        found = _earlier(conversation, full_key)
        if found is None:
            raise
        return found
    return action


def refund_request_decided(approval: Approval) -> None:
    """Another person decided a staff member's refund (gate.approval_decide, in its transaction): approved, it
    is pending, to be made by refund_approved; rejected or expired, it is refused on record, saying who said
    no and why, and its key let go so that the person may ask again."""
    action = approval.staff_action
    if approval.decision == Approval.APPROVED:
        StaffAction.objects.filter(pk=action.pk, status=StaffAction.AWAITING_APPROVAL).update(
            status=StaffAction.PENDING)
    else:
        by = staff_name(approval.decided_by) if approval.decided_by_id else "No one"
        why = (f"{by} rejected it: {approval.reason}" if approval.decision == Approval.REJECTED
               else f"Not made: {approval.reason}.")
        StaffAction.objects.filter(pk=action.pk, status=StaffAction.AWAITING_APPROVAL).update(
            status=StaffAction.REFUSED, result={"error": why, "approval": approval.decision},
            idempotency_key=None)
    action.refresh_from_db()
    _publish_action(action.conversation, action)


def refund_approved(*, action: StaffAction) -> StaffAction:
    """Make a staff member's refund another person approved. Done once whoever calls it (the approver's
    request, the same request again after a crash): the action's row lock and the shop's key see to it. A
    refusal (the balance went meanwhile, the shop is away) is kept on the action, never raised."""
    action.refresh_from_db()
    if action.status != StaffAction.PENDING:
        return action
    arguments = Approval.objects.values_list("requested_arguments", flat=True).get(staff_action=action)
    try:
        order = order_for_customer(_ctx(action.conversation), arguments["order_id"])
        _refund_now(action, order, parse_amount(arguments["amount"]), arguments["reason"])
    except ToolError as error:
        _refuse_intent(action, ActionRefused(str(error)))
    except ActionRefused as error:
        _refuse_intent(action, error)
    except port.ShopUnavailable as away:
        _shop_away(action, away, "refund")
    action.refresh_from_db()
    return action


def _intent(conversation: Conversation, user, kind: str, arguments: dict, full_key: str | None) -> StaffAction:
    """The action as asked, saved (committed) before the shop hears of it; the same key saved meanwhile by
    another request is that request's action."""
    try:
        with transaction.atomic():
            return StaffAction.objects.create(conversation=conversation, user=user, kind=kind, arguments=arguments,
                                              status=StaffAction.PENDING, idempotency_key=full_key)
    except IntegrityError:
        found = _earlier(conversation, full_key)
        if found is None:
            raise
        return found


def _shop_key(action: StaffAction) -> str:
    """The key the shop is sent: the person's request key when they sent one, else the action's own id."""
    return f"staff:{action.idempotency_key or action.public_id}"


def _refuse_intent(action: StaffAction, error: ActionRefused) -> None:
    """Not done: on record as refused, its key let go (as _refused's), so the person may fix it and send it again."""
    StaffAction.objects.filter(pk=action.pk, status=StaffAction.PENDING).update(
        status=StaffAction.REFUSED, result={"error": str(error)}, idempotency_key=None)
    action.refresh_from_db()
    _publish_action(action.conversation, action)


def _shop_away(action: StaffAction, away: port.ShopUnavailable, what: str) -> ActionRefused:
    """The shop did not answer. Sent and unanswered, the action stays pending: the same request sent again asks
    the shop by its key first, so it is never done twice. Not sent, it is refused on record."""
    if isinstance(away, port.OutcomeUnknown):
        StaffAction.objects.filter(pk=action.pk).update(result={"error": str(away), "outcome": "unknown"})
        return ActionRefused(f"The shop did not confirm the {what}, and it could not be asked whether it went "
                             "through. Nothing will be done twice: send the same request again in a minute and "
                             "the desk checks with the shop first.", 503)
    error = ActionRefused(f"The shop can't be reached right now, so the {what} was not made. Try again in a "
                          "minute.", 503)
    _refuse_intent(action, error)
    return error


def _shop_refund(order: port.Order, value: Decimal, reason: str, key: str,
                 conversation: Conversation) -> port.RefundResult:
    try:
        return effects.refund(order_number=order.number, amount=value, reason=reason, key=key,
                              conversation_id=conversation.pk)
    except port.ExceedsRefundable as over:
        raise ActionRefused(f"Order {order.number} has {money(over.refundable)} {order.currency} left to refund; "
                            f"{money(value)} was asked.", 409) from None


# -- messages to the seller -------------------------------------------------------------------------------

def seller_message_send(*, conversation: Conversation, user, order_id, message, key=None) -> StaffAction:
    """A message to the order's seller, sent through the agent's own tool (its rules, minus the approval a
    message with the customer's contact data needs from the agent: a person is writing it)."""
    arguments = {"order_id": order_id, "message": message}
    full_key = _key(user, conversation, StaffAction.SELLER_MESSAGE, key)
    earlier = _earlier(conversation, full_key)
    if earlier is not None and earlier.status != StaffAction.PENDING:
        return earlier
    try:
        body = _text(message, "message", 2000)
    except ActionRefused as error:
        raise _refused(conversation, user, StaffAction.SELLER_MESSAGE, arguments, error) from None
    action = earlier or _intent(conversation, user, StaffAction.SELLER_MESSAGE, arguments, full_key)
    if action.status != StaffAction.PENDING:
        return action
    ctx = _ctx(conversation)
    ctx = ToolContext(customer_id=ctx.customer_id, conversation_id=ctx.conversation_id,
                      idempotency_key=_shop_key(action))
    try:
        with transaction.atomic():
            locked = StaffAction.objects.select_for_update().get(pk=action.pk)
            if locked.status != StaffAction.PENDING:
                return locked
            locked.result, locked.status = message_seller(ctx, order_id=order_id, message=body), StaffAction.DONE
            locked.save(update_fields=["status", "result"])
            _publish_action(conversation, locked)
    except ToolError as error:
        _refuse_intent(action, ActionRefused(str(error)))
        raise ActionRefused(str(error)) from None
    except port.ShopUnavailable as away:
        raise _shop_away(action, away, "message to the seller") from None
    return locked


# -- internal notes ---------------------------------------------------------------------------------------

def note_add(*, conversation: Conversation, user, text) -> Note:
    """A note for staff only. It is not a Message: the model's history and the customer's view are built
    from messages, so a note can reach neither."""
    note = Note.objects.create(conversation=conversation, author=user, text=_text(text, "note", NOTE_MAX_CHARS))

    def send():
        conversation.refresh_from_db(fields=["last_seq"])
        events.publisher.send([events.staff_conversation_group(conversation.public_id)], {
            "type": "note.added", "conversation": str(conversation.public_id), "seq": conversation.last_seq,
            "note": serializers.note_json(note)})
    transaction.on_commit(send)
    return note


# -- saved replies ----------------------------------------------------------------------------------------

def saved_reply_save(*, user, title, body, reply: SavedReply | None = None) -> SavedReply:
    """Create a saved reply, or change `reply`. Titles are unique (they are what staff pick from)."""
    title = _text(title, "title", REPLY_TITLE_MAX)
    body = _text(body, "reply", settings.MAX_MESSAGE_BYTES)
    if SavedReply.objects.filter(title__iexact=title).exclude(pk=getattr(reply, "pk", None)).exists():
        raise ActionRefused(f"A saved reply called “{title}” exists already; choose another title.", 409)
    reply = reply or SavedReply()
    reply.title, reply.body, reply.updated_by = title, body, user
    try:
        with transaction.atomic():
            reply.save()
    except IntegrityError:
        raise ActionRefused(f"A saved reply called “{title}” exists already; choose another title.", 409) from None
    return reply


def saved_reply_delete(*, reply: SavedReply) -> None:
    reply.delete()
