"""What an approval card shows besides the call, so a person can decide in seconds: a sentence saying what
the agent asks and why, the order's money (live, this customer's order only), the limits of the amount a
person may approve, the policy passages the agent read before asking, the third-party text it read just
before asking (selectors_provenance: flagged when it gives the agent instructions), the customer's own
words, the form's fields and when the request stops waiting.

Everything but the order's money comes from the conversation's history as the agent saw it (its tool
results), so the card shows what the agent relied on; the money is read afresh because it is what the
decision changes.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.utils import timezone

from support import profiles
from support.agent.tools import ToolContext
from support.customers.attachments import attachment_json, placeholder
from support.customers.words import staff_name
from support.desk import permissions
from support.desk.selectors_provenance import provenance
from support.models import Approval, Attachment, Message
from support.shop import port
from support.tools import mcp, tool_by_name
from support.tools.common import customer_order, money
from support.tools.sellers import ISSUES, needs_person

HISTORY_READ = 300  # messages before the request read for tool results: a run never needs more
POLICIES_SHOWN = 6
EXCERPT_CHARS = 400
REQUEST_SHOWN = 3  # the customer's last messages before the request
ORDER_NUMBER = re.compile(r"\bSU-\d{1,8}\b", re.IGNORECASE)
MIN_AMOUNT = Decimal("0.01")

# How a form names a tool's argument; anything else gets its own name, made readable.
FIELD_LABELS = {
    "order_id": "Order", "amount": "Amount (EUR)", "reason": "Reason", "summary": "Summary for the person",
    "message": "Message to the seller", "query": "Search", "tracking": "Tracking number",
}
FIELD_HELP = {
    ("issue_refund", "reason"): "Kept with the refund, for the record.",
    ("escalate_to_human", "reason"): "Why a person is needed.",
    ("message_seller", "message"): "Sent to the seller as written, below a header naming Sundry customer "
                                   "support, the order and the issue.",
}
FIXED_FIELDS = {"order_id"}  # another order would be another action: reject and let the agent ask again


def asked_seq(approval: Approval) -> int | None:
    """The seq of the agent's message that asked for the call (None for a row made without one). Kept on
    the approval: the asking message never changes, and a card asks twice (here and for the messages since)."""
    if not hasattr(approval, "_asked_seq"):
        approval._asked_seq = _asked_seq(approval)
    return approval._asked_seq


def _asked_seq(approval: Approval) -> int | None:
    call_id = approval.tool_call.call_id
    for seq, calls in (Message.objects.filter(run_id=approval.run_id, role="assistant", tool_calls__isnull=False)
                       .order_by("-seq").values_list("seq", "tool_calls")):
        if any(isinstance(c, dict) and c.get("id") == call_id for c in calls or ()):
            return seq
    return None


def approval_context(approval: Approval) -> dict:
    """The card's reading aids, for serializers.approval_json."""
    name = approval.tool_call.name
    args = approval.requested_arguments if isinstance(approval.requested_arguments, dict) else {}
    conversation = approval.run.conversation
    asked = asked_seq(approval)
    history = _History.read(conversation.pk, asked)
    order = _order(conversation, _order_number(name, args, history))
    context = {
        "summary": _summary(name, args, history, order),
        "why": _why(name, args),
        "handover_summary": str(args.get("summary") or "") if name == "escalate_to_human" else "",
        "order": _order_json(order) if order is not None else None,
        "amount": _amount_limits(order) if name == "issue_refund" else None,
        "fields": _fields(name, args),
        "service": mcp.server_of(name),  # the MCP server a gated call goes to, named on the card
        **history.policies(cited=_cited_text(name, args, history)),
        "provenance": provenance(history.messages, history.results),
        "customer_request": history.customer_request(),
        "expires_at": _ts(effective_expiry(approval)),
    }
    return context


def approval_provenance(approval: Approval) -> dict:
    """The card's `provenance` alone (selectors_provenance), for a decision that shows no card (bulk)."""
    history = _History.read(approval.run.conversation_id, asked_seq(approval))
    return provenance(history.messages, history.results)


def staff_refund_context(approval: Approval) -> dict:
    """The reading aids of a staff member's own refund waiting for another person (four eyes): who asked, how
    much on which order and why, the order's money now. Approved as asked or rejected: nothing to edit."""
    args = approval.requested_arguments if isinstance(approval.requested_arguments, dict) else {}
    action = approval.staff_action
    number = str(args.get("order_id") or "").upper()
    order = _order(action.conversation, number)
    asker = staff_name(action.user) if action.user_id else "a former colleague"
    return {
        "summary": f"Refund {_amount(args.get('amount'))} EUR on {number} — asked by {asker}",
        "why": str(args.get("reason") or ""), "handover_summary": "",
        "order": _order_json(order) if order is not None else None, "amount": None,
        "fields": _fields("issue_refund", args), "policies": [], "policies_more": [], "provenance": None, "customer_request": [],
        "expires_at": _ts(effective_expiry(approval)), "editable": False,
    }


def effective_expiry(approval: Approval) -> datetime:
    """When no decision is accepted any more: the expiry stamped when asked, or sooner when the timeout was
    shortened since (gate._expired reads the same two)."""
    by_timeout = approval.requested_at + timedelta(seconds=settings.APPROVAL_TIMEOUT_SECONDS)
    return min(approval.expires_at, by_timeout) if approval.expires_at else by_timeout


# -- the conversation as the agent saw it before asking ---------------------------------------------------

class _History:
    def __init__(self, messages: list[dict]):
        self.messages = messages
        self.calls: dict[str, tuple[str, dict]] = {}  # call id -> (tool, arguments)
        # (tool, arguments, parsed result, the tool message), in order
        self.results: list[tuple[str, dict, object, dict]] = []
        for m in messages:
            if m["role"] == "assistant":
                for call in m["tool_calls"] or ():
                    if isinstance(call, dict):
                        fn = call.get("function") or {}
                        self.calls[call.get("id")] = (fn.get("name") or "", _json_object(fn.get("arguments")))
            elif m["role"] == "tool" and m["tool_call_id"] in self.calls:
                tool, arguments = self.calls[m["tool_call_id"]]
                self.results.append((tool, arguments, _json(m["content"]), m))

    @classmethod
    def read(cls, conversation_id: int, asked: int | None) -> "_History":
        rows = Message.objects.filter(conversation_id=conversation_id)
        if asked is not None:
            rows = rows.filter(seq__lt=asked)
        rows = rows.order_by("-seq").values("id", "seq", "role", "author", "content", "tool_calls", "tool_call_id",
                                            "created_at")[:HISTORY_READ]
        return cls(list(rows)[::-1])

    def latest(self, tool: str, match=lambda arguments, result: True):
        for name, arguments, result, _ in reversed(self.results):
            if name == tool and isinstance(result, dict) and match(arguments, result):
                return result
        return None

    def policies(self, cited: str) -> dict:
        """The policies the agent relied on: those whose id or title it cited (in the call's arguments or its
        replies), else the top hit of each search it made (of each scope: Sundry's and the seller's own);
        `policies_more` the rest it was shown, each once."""
        seen: dict[str, dict] = {}
        tops: list[str] = []
        for name, _, result, _ in self.results:
            if name != "search_policy" or not isinstance(result, dict):
                continue
            scopes: set[str] = set()  # a seller-scoped search answers with Sundry's rule and the seller's own
            for doc in (d for d in result.get("results") or () if isinstance(d, dict)):
                key = str(doc.get("doc_id") or doc.get("title") or "")
                if not key:
                    continue
                seen.setdefault(key, {"doc_id": str(doc.get("doc_id") or ""), "title": str(doc.get("title") or ""),
                                      "excerpt": str(doc.get("excerpt") or "")[:EXCERPT_CHARS],
                                      "scope": str(doc.get("scope") or ""),
                                      # the version the agent read; None when the search predates versions
                                      "version": doc["version"] if type(doc.get("version")) is int else None})
                scope = str(doc.get("scope") or "")
                if scope not in scopes and key not in tops:
                    tops.append(key)
                scopes.add(scope)
        text = cited.casefold()
        keys = ([k for k in seen if _names(seen[k], text)] or tops)[:POLICIES_SHOWN]
        return {"policies": [seen[k] for k in keys],
                "policies_more": [seen[k] for k in seen if k not in keys][:POLICIES_SHOWN * 2]}

    def customer_said(self) -> list[dict]:
        return [m for m in self.messages if m["author"] == Message.CUSTOMER and m["content"]][-REQUEST_SHOWN:]

    def customer_request(self) -> list[dict]:
        """The customer's last words before the request: what they asked for, with the photos and PDFs they
        sent (signed links, as in the transcript)."""
        said = self.customer_said()
        files = _files_by_message([m["id"] for m in said])
        return [{"seq": m["seq"], "text": m["content"], "created_at": _ts(m["created_at"]),
                 **_with_files(m["content"], files.get(m["id"], []))} for m in said]


def _names(doc: dict, text: str) -> bool:
    """The agent named this policy: its id, or its title when the title is more than one common word."""
    title = doc["title"].strip()
    return bool(doc["doc_id"] and doc["doc_id"].casefold() in text) or \
        bool(len(title.split()) > 1 and title.casefold() in text)


def _cited_text(name: str, args: dict, history: _History) -> str:
    """What the agent wrote itself before asking: the call's text arguments and its replies."""
    said = [str(v) for v in args.values() if isinstance(v, str)]
    said += [m["content"] for m in history.messages if m["role"] == "assistant" and m["content"]]
    return "\n".join(said)


def _files_by_message(message_ids: list[int]) -> dict[int, list]:
    if not message_ids:
        return {}
    out: dict[int, list] = {}
    for attachment in Attachment.objects.filter(message_id__in=message_ids).order_by("id"):
        out.setdefault(attachment.message_id, []).append(attachment)
    return out


def _with_files(text: str, items: list) -> dict:
    if not items:
        return {}
    return {"attachments": [attachment_json(a, staff=True) for a in items],
            "attachments_only": text == placeholder([a.kind for a in items])}


def _json(text):
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _json_object(text) -> dict:
    value = _json(text)
    return value if isinstance(value, dict) else {}


# -- the order: named by the call, the agent's words, the conversation's scope or its last look-up --------

def _order_number(name: str, args: dict, history: _History) -> str | None:
    if args.get("order_id"):
        return str(args["order_id"]).upper()
    field = mcp.order_field(name)  # a gated MCP tool's order, as MCP_SERVERS names it
    if field and args.get(field):
        return str(args[field]).upper()
    for text in (args.get("reason"), args.get("summary"), args.get("message")):
        found = ORDER_NUMBER.search(str(text or ""))
        if found:
            return found.group(0).upper()
    looked_up = history.latest("get_order")
    if looked_up and looked_up.get("order_id"):
        return str(looked_up["order_id"]).upper()
    return None


def _order(conversation, number: str | None) -> port.Order | None:
    """The order, only when it is this conversation's customer's (within the conversation's order scope),
    by the same rule the agent's tools follow."""
    if not number:
        return None
    ctx = ToolContext(customer_id=conversation.customer_id, conversation_id=str(conversation.public_id))
    return customer_order(ctx, number)


def _order_json(order: port.Order) -> dict:
    return {"number": order.number, "status": order.status, "currency": order.currency,
            "total": money(order.total), "refunded": money(order.refunded),
            "refundable": money(order.refundable), "seller": order.seller.name,
            "items": [item.title for item in order.items]}


def _amount_limits(order: port.Order | None) -> dict:
    """What a refund may be: at least 0.01, at most what is left on the order and the per-refund ceiling
    (the tool refuses more when it runs). Above the large-refund threshold only a lead may approve."""
    ceiling = profiles.effective_limits().refund_ceiling  # REFUND_CEILING, or the profile's lower one
    refundable = order.refundable if order is not None else None
    top = min(refundable, ceiling) if refundable is not None else ceiling
    return {"min": money(MIN_AMOUNT), "max": money(top), "ceiling": money(ceiling),
            "refundable": money(refundable) if refundable is not None else None,
            "max_because": "refundable" if refundable is not None and refundable <= ceiling else "ceiling",
            "large_refund_threshold": money(Decimal(str(permissions.large_refund_threshold())))}


# -- the sentence ----------------------------------------------------------------------------------------

def _summary(name: str, args: dict, history: _History, order: port.Order | None) -> str:
    number = str(args.get("order_id") or (order.number if order else "")).upper()
    if name == "issue_refund":
        sentence = f"Refund {_amount(args.get('amount'))} EUR on {number}"
        fact = _case(args, history, _parcel_fact(history, number))
        return f"{sentence} — {fact}" if fact else sentence
    if name == "escalate_to_human":
        reason = _clause(args.get("reason"))
        return f"Hand over to a person — {reason}" if reason else "Hand over to a person"
    if name == "message_seller":
        seller = order.seller.name if order is not None else "the seller"
        issue = ISSUES.get(str(args.get("issue") or "other"), "")
        about = f" ({issue})" if issue and issue != ISSUES["other"] else ""
        why = needs_person(args)  # the policy's reasons in plain words, each naming its rule
        return f"Send a message to {seller} about {number}{about}" + (f" — {why}" if why else "")
    server = mcp.server_of(name)
    if server is not None:  # "Issue store credit of 15.00 EUR on SU-41207 through the warranty service"
        amount, order = (args.get(f) if f else None for f in (mcp.amount_field(name), mcp.order_field(name)))
        words = mcp.in_words(name)
        words += f" of {_amount(amount)[:20]} EUR" if amount is not None else ""
        words += f" on {str(order).upper()[:20]}" if order else ""
        return f"{words} through the {server} service"
    return f"Run {name}"


# What a refund is about, read first from the agent's own reason, then from the customer's words: the first
# case whose words appear names the card ("item arrived damaged"), the parcel's tracking added where it says
# something about that case.
CASES = (
    ("damaged", re.compile(r"\b(damag|broken|crack|smash|shatter|dented\b|torn\b|leak)", re.IGNORECASE)),
    ("wrong_item", re.compile(r"wrong (item|size|colou?r|product|model)|not what (i|they|the customer) ordered|"
                              r"different (item|product)", re.IGNORECASE)),
    ("missing", re.compile(r"not received|never (came|arrived)|did(n't| not) (arrive|get it|receive)|missing|"
                           r"\blost\b|stolen|not delivered", re.IGNORECASE)),
    ("delayed", re.compile(r"\b(delay|late\b|still (not|hasn't) arrived|taking (too )?long|stuck\b)", re.IGNORECASE)),
)


def _case(args: dict, history: _History, fact: str) -> str:
    """"item arrived damaged (photo sent)", "parcel not received, marked delivered 5 days ago", or the parcel's
    tracking alone when neither the agent nor the customer said what went wrong."""
    said = [str(args.get("reason") or "")] + [m["content"] for m in history.customer_said()]
    case = next((key for text in said for key, words in CASES if words.search(text)), None)
    if case == "damaged":
        photo = Attachment.objects.filter(message_id__in=[m["id"] for m in history.customer_said()],
                                          kind=Attachment.IMAGE).exists()
        return "item arrived damaged" + (" (photo sent)" if photo else "")
    if case == "wrong_item":
        return "wrong item received"
    if case == "missing":
        marked = fact.startswith("parcel marked delivered")
        return f"parcel not received, {fact.removeprefix('parcel ')}" if marked else "parcel not received"
    if case == "delayed":
        return f"delivery delayed, {fact}" if fact and not fact.startswith("parcel marked delivered") \
            else "delivery delayed"
    return fact


def _why(name: str, args: dict) -> str:
    """The agent's own reason, when the tool has one."""
    if name in ("issue_refund", "escalate_to_human"):
        return str(args.get("reason") or "")
    return ""


def _parcel_fact(history: _History, number: str) -> str:
    """"parcel marked delivered 5 days ago": the tracking the agent read for this order's parcel."""
    order = history.latest("get_order", lambda a, r: str(r.get("order_id") or "").upper() == number)
    parcels = [p for p in (order or {}).get("parcels") or () if isinstance(p, dict)]
    trackings = {str(p.get("tracking")) for p in parcels}
    tracked = history.latest("track_parcel", lambda a, r: str(r.get("tracking") or a.get("tracking")) in trackings)
    if tracked is None:
        status = next((str(p.get("status") or "") for p in parcels if p.get("status") == "delivered"),
                      str(parcels[0].get("status") or "") if parcels else "")
        return _status_words(status) if status else ""
    status = str(tracked.get("status") or "")
    last = tracked.get("last_scan") if isinstance(tracked.get("last_scan"), dict) else {}
    at = _parse_ts(last.get("at"))
    ago = _ago(timezone.now() - at) if at else ""
    if status == "delivered":
        return f"parcel marked delivered {ago}".strip()
    words = _status_words(status)
    return f"{words}, last scan {ago}" if ago else words


def _status_words(status: str) -> str:
    return {"delivered": "parcel marked delivered", "in_transit": "parcel in transit",
            "out_for_delivery": "parcel out for delivery", "delayed": "parcel delayed",
            "label_created": "parcel not picked up yet", "returned": "parcel returned to the sender"}.get(
        status, f"parcel {status.replace('_', ' ')}")


def _ago(delta: timedelta) -> str:
    hours = int(delta.total_seconds() // 3600)
    if hours < 1:
        return "less than an hour ago"
    if hours < 48:
        return f"{hours} hour{'s' if hours != 1 else ''} ago"
    return f"{hours // 24} days ago"


def _amount(value) -> str:
    try:
        return money(Decimal(str(value)))
    except (InvalidOperation, ValueError):
        return str(value)


def _clause(text, limit: int = 160) -> str:
    text = " ".join(str(text or "").split()).rstrip(" .")
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


# -- the form --------------------------------------------------------------------------------------------

def _fields(name: str, args: dict) -> list[dict]:
    """One field per argument, in the schema's order: the amount as an amount, long texts as text areas,
    the order fixed. Limits come along for the browser; the server checks them again."""
    tool = tool_by_name(name)
    properties = (tool.parameters.get("properties") or {}) if tool else {}
    required = set((tool.parameters.get("required") or ()) if tool else ())
    names = list(properties) + [key for key in args if key not in properties]
    fields = []
    for key in names:
        if key not in args and key not in required:
            continue
        spec = properties.get(key) or {}
        if key == "amount" and name == "issue_refund":
            kind = "amount"
        elif key in FIXED_FIELDS:
            kind = "fixed"
        elif spec.get("type") == "string" or isinstance(args.get(key), str):
            kind = "textarea" if (spec.get("maxLength") or 0) > 300 else "text"
        else:
            kind = "json"
        money_field = key == ("amount" if name == "issue_refund" else mcp.amount_field(name))
        fields.append({"name": key, "label": FIELD_LABELS.get(key, key.replace("_", " ").capitalize()),
                       "kind": kind, "money": money_field, "required": key in required,
                       "max_length": spec.get("maxLength"), "help": FIELD_HELP.get((name, key), "")})
    return fields


def _ts(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def _parse_ts(value) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
