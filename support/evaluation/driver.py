"""Play one scenario through the desk: the demo shop seeded afresh, the customer's messages saved as the
desk saves them, every run worked by the real runner (loop, tools, approvals, persistence), staff
decisions written through the same service the console uses; then what happened, read back from the
database and checked against the scenario's criteria.

It works on whatever database is current: the evaluate command gives it a throwaway one, tests give it
the test database. Nothing is sent to a broker or the live UIs while it runs, and no MCP server of the site's
own is reached (what it does could not be undone): only the demo ones a scenario names, started for it.
"""

from __future__ import annotations

import json
import secrets
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from io import BytesIO
from unittest import mock

from django.conf import settings
from django.core import mail
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.db.models import Count, F, Max, Sum
from django.test.utils import override_settings
from PIL import Image

from agentsite.mcp_settings import parse_servers
from standin import warranty
from sundry import POLICIES
from support.desk import gate, inbound_mail, queue, runner, services, uploads
from support.desk.demo import demo_conversations_delete, demo_staff_user, seed_demo
from support.desk.policy_import import import_policies
from support.live import events, presence
from support.models import (
    Approval,
    Conversation,
    Customer,
    InboundEmail,
    Message,
    Order,
    PolicyDocument,
    PolicyVersion,
    Refund,
    Run,
    Scan,
    SellerMessage,
    ShopEffect,
    Step,
    ToolCall,
)
from support.tools import mcp

from . import copilot, endstate
from .mail import MAIL_SETTINGS, customer_mail, desk_answer
from .criteria import Check, Observed, check, check_end_state
from .customer import CustomerModel
from .scenario import Decision, Expect, Scenario
from .triage import model_judge, triage

MAX_RUNS_PER_TURN = 20  # a turn that needs more runs than this is going round in circles


@dataclass
class ScenarioRun:
    """One attempt at one scenario: its verdict, its numbers and its evidence (for the reports)."""

    name: str
    title: str
    attempt: int = 1
    skipped: str = ""
    checks: list[Check] = field(default_factory=list)
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    customer_calls: int = 0  # the simulated customer's model calls, not counted above
    transcript: list[dict] = field(default_factory=list)
    trace: list[dict] = field(default_factory=list)
    decisions: list[dict] = field(default_factory=list)
    error: str = ""
    # How the simulated customer ended the chat: "stop", "transfer", "out-of-scope" (its tokens), "never" (it ran
    # out of turns), "waiting" (the desk never answered its last message), "error" (its model failed); "" with no
    # simulated customer.
    customer_end: str = ""
    stop_reasons: list[str] = field(default_factory=list)  # each run's, oldest first
    runs: list[dict] = field(default_factory=list)  # each run, oldest first: status, stop_reason, outcome
    triage: dict | None = None  # a failed attempt's {"label", "why"} (triage.py)

    @property
    def passed(self) -> bool:
        return not self.skipped and all(c.ok for c in self.checks)

    @property
    def failed(self) -> list[str]:
        return [c.name for c in self.checks if not c.ok]

    def as_dict(self) -> dict:
        return {
            "name": self.name, "title": self.title, "attempt": self.attempt, "passed": self.passed,
            "skipped": self.skipped, "failed": self.failed, "checks": [c.as_dict() for c in self.checks],
            "model_calls": self.model_calls, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, "cost_usd": round(self.cost_usd, 6),
            "seconds": round(self.seconds, 2), "customer_calls": self.customer_calls,
            "transcript": self.transcript, "trace": self.trace, "decisions": self.decisions, "error": self.error,
            "customer_end": self.customer_end, "stop_reasons": self.stop_reasons, "runs": self.runs,
            "triage": self.triage,
        }


# A shop the scenarios reach over HTTP (SHOP_BACKEND=http): reset before each scenario, its clock moved with
# the desk's. None: the demo's own tables, which seed_demo resets.
_remote_shop = None


@contextmanager
def on_remote_shop(server):
    """Scenarios run against `server` (the reference shop: reset(), time_passes(hours)) until the block ends."""
    global _remote_shop
    _remote_shop = server
    try:
        yield
    finally:
        _remote_shop = None


# The warranty service of the scenario being played, when it names one: what reached it is observed.
_warranty = None


@contextmanager
def mcp_services(names: tuple[str, ...]):
    """MCP_SERVERS for one scenario: the demo servers it names, each started on a free port and stopped after
    it; none of the site's own."""
    global _warranty
    server = warranty.start_in_thread(token=secrets.token_urlsafe(16)) if "warranty" in names else None
    mcp.forget_listings()  # tools listed for another scenario's server are not this one's
    try:
        with override_settings(MCP_SERVERS=parse_servers(server.setting()) if server is not None else []):
            _warranty = server
            yield
    finally:
        _warranty = None
        mcp.forget_listings()
        if server is not None:
            server.stop()


@contextmanager
def quiet_desk():
    """Runs are worked here, not by Celery; events have no one to reach; no staff member is online (routing
    leaves work unassigned, as it does when nobody is, without asking Redis). Rate limits count from zero
    under a scope of this trial's own: an earlier trial's conversations of the same demo customer never make
    this one wait, and the site's own counters are never touched."""
    # autospec: the stand-ins take exactly what the real ones take, so a changed signature fails loudly here.
    with mock.patch.object(queue, "run_agent", autospec=True), \
            mock.patch.object(events.publisher, "send", autospec=True), \
            mock.patch.object(presence, "online_user_ids", lambda: set()), \
            override_settings(LIMITS_SCOPE=f"evaluation:{secrets.token_hex(8)}:"):
        yield


def run_scenario(scenario: Scenario, *, attempt: int = 1, customer_model: CustomerModel | None = None) -> ScenarioRun:
    record = ScenarioRun(name=scenario.name, title=scenario.title, attempt=attempt)
    if scenario.skip:
        record.skipped = scenario.skip
        return record
    t0 = time.monotonic()
    conversation = None
    try:
        mail_settings = MAIL_SETTINGS if scenario.channel == "email" else {}
        with override_settings(**_settings(scenario.settings), **mail_settings), quiet_desk(), \
                mcp_services(scenario.mcp_servers):
            _demo_policies_only()
            # Every trial starts from the contract's shop, as `./dev reset` leaves it: earlier trials' conversations,
            # refunds and messages are gone (with them what the desk counts without Redis: a customer's messages
            # of the last minute).
            demo_conversations_delete()
            seed_demo()
            if _remote_shop is not None:
                _remote_shop.reset()
            shop_before = endstate.baseline(_remote_shop)
            _import_policies(scenario.import_policies)
            staff = demo_staff_user()
            if scenario.channel == "email":  # the first mail starts the conversation; anyone may write
                mail.outbox = []
                start = _mark(None)
                sender = (Customer.objects.filter(email=scenario.customer).first()
                          or Customer(name="", email=scenario.customer))  # a stranger: not saved here
                for i, turn in enumerate(scenario.turns, 1):
                    conversation = _mail_turn(record, conversation, sender, staff, f"turn {i}", turn)
                if conversation is None:
                    raise RuntimeError("the customer's first e-mail started no conversation")
            else:
                customer = Customer.objects.get(email=scenario.customer)
                conversation = services.conversation_start(customer=customer)
                start = _mark(conversation)
                for i, turn in enumerate(scenario.turns, 1):
                    _turn(record, conversation, staff, f"turn {i}", turn.say, turn.after_hours,
                          list(turn.decisions), turn.expect, attach=turn.attach)
            if scenario.simulated is not None:
                _simulated(record, conversation, staff, scenario, customer_model)
            record.checks += check(scenario.expect, _observe(conversation, start), "conversation")
            if scenario.end_state is not None:
                record.checks += check_end_state(scenario.end_state,
                                                 endstate.observe(conversation, shop_before, _remote_shop))
            if scenario.copilot is not None:  # a person takes it over and works it with the copilot
                record.checks += copilot.play(scenario.copilot, conversation, staff, shop_before, _remote_shop)
    except Exception as e:  # a crash is a failed criterion with its cause, never the end of the evaluation
        record.error = "".join(traceback.format_exception_only(type(e), e)).strip()
        record.checks.append(Check("runs to the end without an error", False, record.error))
    if conversation is not None:
        endstate.evidence(record, conversation)
    if not record.passed:
        judge = settings.EVALUATION_TRIAGE_MODEL
        record.triage = triage(record, model_judge(judge) if judge else None)
    record.seconds = time.monotonic() - t0
    return record


def _settings(values: dict) -> dict:
    out = {}
    for key, value in values.items():
        out[key] = Decimal(str(value)) if key in ("REFUND_CEILING", "AUTO_APPROVE_REFUNDS_UP_TO") else value
    return out


def _demo_policies_only() -> None:
    """The policies as seeded: another scenario's imports gone, and the history they started (seed_demo then
    writes the demo's words back, each save clearing the search's cache)."""
    PolicyDocument.objects.exclude(doc_id__in=[doc_id for doc_id, *_ in POLICIES]).delete()
    PolicyVersion.objects.all().delete()
    PolicyDocument.objects.update(version=1, source="")


def _import_policies(paths: tuple[str, ...]) -> None:
    if not paths:
        return
    refused = import_policies(paths, changed_by="evaluation").refused
    if refused:
        raise RuntimeError("import_policies refused " + "; ".join(f"{r.source} ({r.code}): {r.why}" for r in refused))


def _turn(record: ScenarioRun, conversation: Conversation, staff, scope: str, say: str, after_hours: float,
          decisions: list[Decision], expect: Expect, report_unused: bool = True, attach: tuple = ()) -> None:
    if after_hours:
        _time_passes(conversation, after_hours)
    before = _mark(conversation)
    if attach:
        _customer_sends_files(conversation, say, attach)
    else:
        _customer_says(conversation, say)
    log = _work(conversation, staff, decisions, scope)
    record.decisions += log
    record.checks += [Check(f"{scope}: decision {e['decision']}", e["as_expected"], e["detail"]) for e in log]
    if report_unused:
        _unused(record, scope, decisions)
    record.checks += check(expect, _observe(conversation, before), scope)


def _mail_turn(record: ScenarioRun, conversation: Conversation | None, customer: Customer, staff, scope: str,
               turn) -> Conversation | None:
    """One e-mail from the customer, through the desk's way in for mail (inbound_mail.receive, as a provider's
    webhook or the polled mailbox hands it over): a mail of its own, or a reply / an out-of-office answer to the
    desk's latest answer e-mail, quoting it under the customer's words. Returns the conversation."""
    if turn.after_hours and conversation is not None:
        _time_passes(conversation, turn.after_hours)
    answer = None
    if turn.email:
        answer = desk_answer(conversation, customer)
        record.checks.append(Check(f"{scope}: the desk's answer reached the customer by e-mail", answer is not None,
                                   answer.subject if answer is not None else "no answer e-mail to reply to"))
        if answer is None:
            return conversation
    before = _mark(conversation)
    received = inbound_mail.receive(customer_mail(customer, turn, answer), source="evaluation")
    if turn.email == "auto-reply":
        record.checks.append(Check(f"{scope}: the automatic reply is kept, not answered",
                                   received.outcome == InboundEmail.AUTO_REPLY and received.message_id is None,
                                   f"{received.outcome}: {received.detail}"))
    else:
        landed = received.message_id is not None and (conversation is None
                                                      or received.conversation_id == conversation.pk)
        where = "a new conversation" if conversation is None else "its conversation"
        record.checks.append(Check(f"{scope}: the mail lands in {where}", landed,
                                   f"{received.outcome}: {received.detail}"))
        saved = received.message.content if received.message_id else ""
        record.checks.append(Check(f"{scope}: only the customer's new words are saved",
                                   " ".join(saved.split()) == " ".join(turn.say.split()), saved[:300]))
    if conversation is None:
        if received.conversation_id is None:
            return None
        conversation = received.conversation
    decisions = list(turn.decisions)
    log = _work(conversation, staff, decisions, scope)
    record.decisions += log
    record.checks += [Check(f"{scope}: decision {e['decision']}", e["as_expected"], e["detail"]) for e in log]
    _unused(record, scope, decisions)
    record.checks += check(turn.expect, _observe(conversation, before), scope)
    return conversation


def _simulated(record: ScenarioRun, conversation: Conversation, staff, scenario: Scenario,
               customer_model: CustomerModel | None) -> None:
    sim = scenario.simulated
    if customer_model is None:
        record.checks.append(Check("simulated customer", False, "no customer model was given"))
        return
    decisions = list(sim.decisions)
    record.customer_end = "never"
    for k in range(1, sim.max_turns + 1):
        said = customer_model.next_message(sim, _seen_by_customer(conversation))
        record.customer_calls += 1
        if said.error:
            record.customer_end = "error"
            record.checks.append(Check(f"simulated turn {k}: the customer model answers", False, said.error,
                                       "customer_fault"))
            return
        if said.text is None:
            record.customer_end = said.end
            break
        _turn(record, conversation, staff, f"simulated turn {k}", said.text, 0, decisions, Expect(),
              report_unused=False)
    _unused(record, "simulated turns", decisions)
    if sim.expect_end:
        record.checks.append(Check(f"the simulated customer ends with {sim.expect_end}",
                                   record.customer_end == sim.expect_end, f"it ended with {record.customer_end}",
                                   "customer_fault" if record.customer_end in ("never", "error") else ""))


def _unused(record: ScenarioRun, scope: str, decisions: list[Decision]) -> None:
    for d in decisions:  # scripted, but the agent never asked for that gated call
        record.checks.append(Check(f"{scope}: decision {d.describe()}", False,
                                   "never used: the agent did not ask for this gated call", "missing_approval_request"))


def _customer_says(conversation: Conversation, text: str) -> None:
    """The customer's message saved as conversation_post_message saves it, minus the rate limits: an
    evaluation writes faster than any customer, and its counters would live in a Redis it may not have."""
    text = services.message_clean(text)
    with transaction.atomic():
        services.message_append(conversation=conversation, wire={"role": "user", "content": text},
                                author=Message.CUSTOMER)
        services.run_start_if_idle(conversation_id=conversation.pk, current=conversation)


def _customer_sends_files(conversation: Conversation, text: str, kinds: tuple) -> None:
    """The customer's message with files, through the desk's own upload path (checked and stored as any)."""
    def upload(n: int, kind: str):
        if kind == "pdf":
            return SimpleUploadedFile(f"receipt-{n}.pdf", b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n",
                                      "application/pdf")
        out = BytesIO()
        Image.new("RGB", (1200, 900), (120, 90, 60)).save(out, "JPEG")
        return SimpleUploadedFile(f"photo-{n}.jpg", out.getvalue(), "image/jpeg")

    uploads.conversation_post_files(conversation=conversation, text=text,
                                    uploads=[upload(n, kind) for n, kind in enumerate(kinds, 1)])


def _work(conversation: Conversation, staff, decisions: list[Decision], scope: str) -> list[dict]:
    """Work queued runs, deciding gated calls from `decisions` (consumed in order, per tool), until
    nothing is queued and nothing pending has a decision left. Returns what each decision did."""
    log: list[dict] = []
    for _ in range(MAX_RUNS_PER_TURN):
        run = Run.objects.filter(conversation=conversation, status=Run.QUEUED).order_by("pk").first()
        if run is not None:
            runner.run_execute(run.pk)
            continue
        pending = Approval.objects.filter(run__conversation=conversation, decided_at__isnull=True) \
            .select_related("tool_call", "run").order_by("pk")
        progressed = False
        for approval in pending:
            while True:
                decision = next((d for d in decisions if d.tool == approval.tool_call.name), None)
                if decision is None:
                    break
                decisions.remove(decision)
                entry = _decide(approval, decision, staff, scope)
                log.append(entry)
                if entry["accepted"]:
                    progressed = True
                    break
        if not progressed:
            return log
    raise RuntimeError(f"{scope}: more than {MAX_RUNS_PER_TURN} runs in one turn")


REFUSALS = ((gate.NeedsSecondLook, "needs_second_look"), (gate.ApprovalExpired, "expired"),
            (services.AlreadyDecided, "already_decided"), (services.InvalidArguments, "invalid_arguments"))


def _decide(approval: Approval, decision: Decision, staff, scope: str) -> dict:
    approval.refresh_from_db()
    refused, message = "", ""
    try:
        if decision.action == "reject":
            gate.approval_decide(approval=approval, user=staff, approve=False, reason=decision.reason)
        else:
            arguments = {**approval.requested_arguments, **decision.arguments} if decision.action == "edit" else None
            gate.approval_decide(approval=approval, user=staff, approve=True, arguments=arguments,
                                     confirm_seen=decision.confirm_seen)
    except tuple(kind for kind, _ in REFUSALS) as e:
        refused = next(code for kind, code in REFUSALS if isinstance(e, kind))
        message = str(e)
    if decision.refused:
        detail = f"refused as expected ({refused})" if refused == decision.refused else \
            f"should have been refused ({decision.refused}) but was {f'refused ({refused})' if refused else 'accepted'}"
    else:
        detail = f"refused ({refused}): {message}" if refused else "accepted"
    return {"scope": scope, "decision": decision.describe(), "tool": approval.tool_call.name,
            "requested": approval.requested_arguments, "refused": refused, "accepted": not refused,
            "as_expected": refused == decision.refused, "detail": detail}


@dataclass(frozen=True)
class _Mark:
    seq: int
    step: int
    refund: int
    seller_message: int
    approval: int
    store_credit: int


def _mark(conversation: Conversation | None) -> _Mark:
    """Where things stand before a turn; None: before the conversation exists (an e-mail that will start it)."""
    if conversation is not None:
        conversation.refresh_from_db(fields=["last_seq"])

    def top(model) -> int:
        return model.objects.aggregate(m=Max("pk"))["m"] or 0
    return _Mark(conversation.last_seq if conversation is not None else 0, top(Step), top(ShopEffect), top(ShopEffect), top(Approval),
                 len(_warranty.credits) if _warranty is not None else 0)


def _observe(conversation: Conversation, since: _Mark) -> Observed:
    conversation.refresh_from_db()
    seen = Observed(conversation_status=conversation.status)
    searches = set()  # the ids of the search_policy calls, whose results are the policies read
    for m in conversation.messages.filter(seq__gt=since.seq, role__in=("assistant", "tool")).order_by("seq"):
        if m.role == "tool":
            if m.tool_call_id in searches:
                seen.policies_read += _policies(m.content)
            continue
        for c in m.tool_calls or []:
            fn = c.get("function") or {}
            seen.calls.append((fn.get("name", ""), _arguments(fn.get("arguments"))))
            if fn.get("name") == "search_policy":
                searches.add(c.get("id"))
        if (m.content or "").strip():
            seen.text += m.content.strip() + "\n"
    run = Run.objects.filter(conversation=conversation).order_by("-pk").first()
    if run is not None:
        seen.status, seen.stop_reason, seen.outcome = run.status, run.stop_reason, run.outcome
    # What the desk made happen in the shop, from its own record: the same for every shop backend.
    seen.refunds = [(r.order_number, f"{r.amount:.2f}") for r in ShopEffect.objects.filter(
        pk__gt=since.refund, kind=ShopEffect.REFUND).order_by("pk")]
    seen.seller_messages = [(m.order_number, m.text) for m in ShopEffect.objects.filter(
        pk__gt=since.seller_message, kind=ShopEffect.SELLER_MESSAGE).order_by("pk")]
    seen.approvals = [(a.tool_call.name, a.decision or "pending") for a in Approval.objects.filter(
        pk__gt=since.approval, run__conversation=conversation).select_related("tool_call").order_by("pk")]
    if _warranty is not None:
        seen.store_credits = [(c["order_number"], c["amount"]) for c in _warranty.credits[since.store_credit:]]
    spent = Step.objects.filter(run__conversation=conversation, kind="model", pk__gt=since.step).aggregate(
        n=Count("pk"), prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"), cost=Sum("cost_usd"),
        largest=Max("prompt_tokens"))
    seen.model_calls = spent["n"]
    seen.tokens = (spent["prompt"] or 0) + (spent["completion"] or 0)
    seen.largest_prompt = spent["largest"] or 0
    seen.cost_usd = float(spent["cost"] or 0)
    return seen


def _arguments(text) -> dict | None:
    try:
        value = json.loads(text or "{}")
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _policies(text) -> list[tuple[str, int | None]]:
    """(doc_id, version) of each document a search_policy result returned."""
    value = _arguments(text) or {}
    results = value.get("results") if isinstance(value.get("results"), list) else []
    return [(str(r.get("doc_id")), r.get("version") if type(r.get("version")) is int else None)
            for r in results if isinstance(r, dict) and r.get("doc_id")]


def _seen_by_customer(conversation: Conversation) -> list[tuple[str, str]]:
    out = []
    for m in conversation.messages.filter(role__in=("user", "assistant")).order_by("seq"):
        if (m.content or "").strip():
            out.append(("customer" if m.role == "user" else "desk", m.content.strip()))
    return out


def _time_passes(conversation: Conversation, hours: float) -> None:
    """The customer comes back later: everything the shop and this conversation recorded moves into the
    past by `hours` (the clock cannot move forward, so the past moves back)."""
    back = timedelta(hours=hours)

    def shift(queryset, *fields):
        queryset.update(**{f: F(f) - back for f in fields})
    shift(Scan.objects.all(), "at")
    shift(Order.objects.all(), "placed_at")
    shift(Refund.objects.all(), "created_at")
    shift(SellerMessage.objects.all(), "created_at")
    shift(ShopEffect.objects.all(), "created_at")
    if _remote_shop is not None:
        _remote_shop.time_passes(hours)
    shift(Conversation.objects.filter(pk=conversation.pk), "created_at", "updated_at")
    shift(Message.objects.filter(conversation=conversation), "created_at")
    shift(Run.objects.filter(conversation=conversation), "created_at", "finished_at", "heartbeat_at")
    shift(Step.objects.filter(run__conversation=conversation), "created_at")
    shift(ToolCall.objects.filter(run__conversation=conversation), "created_at", "updated_at")
    shift(Approval.objects.filter(run__conversation=conversation), "requested_at", "decided_at", "expires_at")
