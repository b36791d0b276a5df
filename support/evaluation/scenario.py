"""Scenario files (evaluation/scenarios/*.toml) read into plain values, with every mistake named.

No Django here: a scenario is data. The format is described in evaluation/README.md.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from pathlib import Path

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "evaluation" / "scenarios"

ACTIONS = ("approve", "edit", "reject")
ATTACHABLE = ("photo", "pdf")
CHANNELS = ("widget", "email")  # how the customer writes: in the widget, or by e-mail to the desk's address
# An e-mail turn: "" a mail of its own (the first starts the thread), "reply" a reply to the desk's latest answer
# e-mail (quoting it, threaded by its headers), "auto-reply" an out-of-office answer to it (never a new run).
EMAIL_KINDS = ("", "reply", "auto-reply")
REFUSALS = ("needs_second_look", "already_decided", "expired", "invalid_arguments")
# Desk settings a scenario may change for its own run (anything else is a mistake in the file).
SETTINGS = ("AUTO_APPROVE_REFUNDS_UP_TO", "ESCALATION_NEEDS_APPROVAL", "AGENT_ASKS_AFTER_REJECTION",
            "REFUND_CEILING", "AGENT_MAX_STEPS", "MODEL_CONTEXT_WINDOW", "COMPACT_AT_SHARE",
            "CONVERSATION_MAX_STEPS_PER_DAY", "CONVERSATION_MAX_TOKENS_PER_DAY")
# The demo MCP servers a scenario may use (`mcp_servers`): the driver starts each for the scenario alone.
MCP_SERVERS = ("warranty",)


class ScenarioError(ValueError):
    """A scenario file that cannot be run as written; the message names the file and the field."""


@dataclass(frozen=True)
class CallRule:
    """A tool call the model made: `tool`, with `args` equal and `match` (regexes) found in its arguments."""

    tool: str
    args: dict = field(default_factory=dict)
    match: dict = field(default_factory=dict)

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in self.args.items()] + [f"{k}~/{v}/" for k, v in self.match.items()]
        return f"{self.tool}({', '.join(parts)})"


@dataclass(frozen=True)
class Expect:
    """Success criteria for one turn or for the whole conversation; None means "not checked"."""

    status: str | None = None  # stopped | awaiting_approval
    stop_reason: str | None = None
    outcome: str | None = None
    calls: tuple[CallRule, ...] = ()
    no_calls: tuple[CallRule, ...] = ()
    call_order: tuple[str, ...] = ()
    says: tuple[str, ...] = ()
    says_match: tuple[str, ...] = ()
    never_says: tuple[str, ...] = ()
    refunds: tuple[tuple[str, str], ...] | None = None  # (order, amount): exactly these were issued
    seller_messages: tuple[tuple[str, str], ...] | None = None  # (order, text it contains): exactly these
    approvals: tuple[tuple[str, str], ...] | None = None  # (tool, decision or "pending"): exactly these
    store_credits: tuple[tuple[str, str], ...] | None = None  # (order, amount): exactly these reached the service
    policies_read: tuple[tuple[str, int | None], ...] = ()  # (doc_id, version or None): each among the results
    conversation_status: str | None = None
    max_model_calls: int | None = None
    max_tokens: int | None = None
    max_prompt_tokens_per_call: int | None = None
    max_cost_usd: float | None = None


@dataclass(frozen=True)
class Decision:
    """What staff do with the next gated call of `tool`: approve, edit (approve with changed arguments)
    or reject with a reason. `refused`: the desk must refuse this decision, with that code."""

    tool: str
    action: str
    arguments: dict = field(default_factory=dict)
    reason: str = ""
    confirm_seen: bool = True
    refused: str = ""

    def describe(self) -> str:
        what = {"approve": "approve", "edit": f"approve with {self.arguments}",
                "reject": f"reject ({self.reason})"}[self.action]
        seen = "" if self.confirm_seen else " without confirming the customer's new messages"
        return f"{what} {self.tool}{seen}"


@dataclass(frozen=True)
class Turn:
    say: str
    after_hours: float = 0.0  # time that passes before the customer writes (they come back the next day)
    attach: tuple[str, ...] = ()  # files sent with the message: "photo" (a generated JPEG) or "pdf"
    email: str = ""  # in an e-mail scenario: EMAIL_KINDS
    decisions: tuple[Decision, ...] = ()
    expect: Expect = Expect()


# How a simulated customer ends the chat (customer.py): the token it writes, by the name `expect_end` uses.
ENDINGS = ("stop", "transfer", "out-of-scope")
# Approval decisions an end state may name: "edited" is an approval with changed arguments.
END_DECISIONS = ("approved", "edited", "rejected", "expired", "pending")
CONVERSATION_STATUSES = ("open", "needs_attention", "taken_over")  # support.models.Conversation.STATUSES


@dataclass(frozen=True)
class SimulatedCustomer:
    """Turns written by a second model playing the customer, after the scripted ones, in the shape of a
    τ²-bench user scenario: why they write, what they know, what they do not, how to behave."""

    reason_for_call: str
    persona: str = ""
    known_info: str = ""
    unknown_info: str = ""
    task_instructions: str = ""
    max_turns: int = 3
    expect_end: str = ""  # ENDINGS, or "" for not checked
    decisions: tuple[Decision, ...] = ()

    @property
    def goal(self) -> str:  # the older name of reason_for_call
        return self.reason_for_call


@dataclass(frozen=True)
class SellerNote:
    order: str
    seller: str = ""  # the seller's code ("S-HL"); "" for any
    contains: str = ""


@dataclass(frozen=True)
class EndState:
    """What the shop and the desk hold once the conversation is over, compared exactly: every write the desk
    made is listed (a kind left out means none of it), and must_tell are facts the customer was shown."""

    refunds: tuple[tuple[str, str], ...] = ()  # (order, amount)
    seller_messages: tuple[SellerNote, ...] = ()
    approvals: tuple[tuple[str, str], ...] = ()  # (tool, END_DECISIONS)
    escalations: tuple[str, ...] = ()  # one per hand-over: a text its reason or summary contains ("" any)
    conversation_status: str | None = None
    must_tell: tuple[str, ...] = ()


@dataclass(frozen=True)
class CopilotExpect:
    """After the turns a person takes the conversation over and asks the staff's copilot (support/copilot/) for a
    draft and a suggestion: the draft cites `draft_cites` (a policy's doc_id) at its current version, the
    suggestion is `suggests` ("refund" | "seller_message"), and once the person makes it from the console the shop
    and the desk hold `end_state`."""

    draft_cites: str = ""
    suggests: str = ""
    end_state: EndState | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    path: str
    customer: str
    turns: tuple[Turn, ...]
    expect: Expect = Expect()
    covers: tuple[str, ...] = ()  # the demo orders (docs/tools-contract.md) it works
    tags: tuple[str, ...] = ()
    skip: str = ""  # listed but not run, with this reason
    settings: dict = field(default_factory=dict)
    simulated: SimulatedCustomer | None = None
    mcp_servers: tuple[str, ...] = ()  # the demo MCP servers it uses (MCP_SERVERS above)
    import_policies: tuple[str, ...] = ()  # files or folders imported before it starts, as absolute paths
    channel: str = "widget"  # CHANNELS
    end_state: EndState | None = None
    # Which profiles it is for, by their guidance (regexes, case-insensitive): run only when a rule of the profile's
    # guidance matches `for_guidance`, and when none matches `unless_guidance`; on any other profile it is skipped.
    for_guidance: str = ""
    unless_guidance: str = ""
    copilot: CopilotExpect | None = None

    def for_profile(self, guidance: tuple[str, ...]) -> Scenario:
        """This scenario as played under a profile with `guidance`: skipped, saying why, when it is not for it."""
        if self.skip:
            return self
        if self.for_guidance and not any(re.search(self.for_guidance, g, re.IGNORECASE) for g in guidance):
            return replace(self, skip=f"for profiles whose guidance says /{self.for_guidance}/")
        if self.unless_guidance and any(re.search(self.unless_guidance, g, re.IGNORECASE) for g in guidance):
            return replace(self, skip=f"for profiles whose guidance does not say /{self.unless_guidance}/")
        return self


def load_all(directory: Path = SCENARIO_DIR, pattern: str = "*") -> list[Scenario]:
    """Every scenario of the folder whose name matches the glob `pattern`, by name."""
    out = []
    for path in sorted(directory.glob("*.toml")):
        if fnmatch.fnmatch(path.stem, pattern):
            out.append(load(path))
    return out


def load(path: Path) -> Scenario:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path.name}: not valid TOML ({e})") from e
    return parse(data, path.stem, str(path))


def parse(data: dict, name: str, where: str = "") -> Scenario:
    """`where` is the file's path: `import_policies` are read relative to its folder (else SCENARIO_DIR)."""
    folder = Path(where).resolve().parent if where else SCENARIO_DIR
    where = Path(where).name if where else name
    r = _Reader(data, where)
    turns = tuple(_turn(_Reader(t, f"{where} turn {i}")) for i, t in enumerate(r.tables("turn"), 1))
    simulated = None
    if "simulated_customer" in data:
        simulated = _simulated(_Reader(r.table("simulated_customer"), f"{where} simulated_customer"))
    if not turns and simulated is None:
        raise ScenarioError(f"{where}: a scenario needs at least one [[turn]] or a [simulated_customer]")
    settings = r.table("settings") if "settings" in data else {}
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise ScenarioError(f"{where}: [settings] may set {', '.join(SETTINGS)}; not {', '.join(unknown)}")
    scenario = Scenario(
        name=name, title=r.text("title", required=True), path=where, customer=r.text("customer", required=True),
        turns=turns, expect=_expect(_Reader(r.table("expect"), f"{where} expect")) if "expect" in data else Expect(),
        covers=r.strings("covers"), tags=r.strings("tags"), skip=r.text("skip"), settings=dict(settings),
        simulated=simulated, mcp_servers=_servers(r), import_policies=_policy_paths(r, folder),
        channel=r.text("channel") or "widget",
        end_state=_end_state(_Reader(r.table("end_state"), f"{where} end_state")) if "end_state" in data else None,
        for_guidance=_pattern(r, "for_guidance"), unless_guidance=_pattern(r, "unless_guidance"),
        copilot=_copilot(_Reader(r.table("copilot"), f"{where} copilot")) if "copilot" in data else None,
    )
    r.done()
    if scenario.channel not in CHANNELS:
        raise ScenarioError(f"{where}: channel is one of {', '.join(CHANNELS)}, not {scenario.channel!r}")
    if scenario.channel == "email":
        if simulated is not None or any(t.attach for t in turns):
            raise ScenarioError(f"{where}: an e-mail scenario has scripted turns without attachments")
        if turns and turns[0].email:
            raise ScenarioError(f"{where}: the first e-mail starts the thread: it cannot be a {turns[0].email}")
    elif any(t.email for t in turns):
        raise ScenarioError(f'{where}: email = "..." is for turns of a scenario with channel = "email"')
    credits = [e for e in (scenario.expect, *(t.expect for t in turns)) if e.store_credits is not None]
    if credits and "warranty" not in scenario.mcp_servers:
        raise ScenarioError(f'{where}: store_credits are counted by the warranty service: add '
                            'mcp_servers = ["warranty"]')
    return scenario


def _pattern(r: "_Reader", key: str) -> str:
    text = r.text(key)
    try:
        re.compile(text)
    except re.error as e:
        raise ScenarioError(f"{r.where}: {key} is not a regular expression ({e})") from e
    return text


def _simulated(s: "_Reader") -> SimulatedCustomer:
    reason, goal = s.text("reason_for_call"), s.text("goal")
    if reason and goal:
        raise ScenarioError(f"{s.where}: goal is the older name of reason_for_call: give one of them")
    if not (reason or goal):
        raise ScenarioError(f"{s.where}: reason_for_call is required (why the customer writes)")
    sim = SimulatedCustomer(
        reason_for_call=reason or goal, persona=s.text("persona"), known_info=s.text("known_info"),
        unknown_info=s.text("unknown_info"), task_instructions=s.text("task_instructions"),
        max_turns=s.integer("max_turns", 3), expect_end=s.text("expect_end"),
        decisions=tuple(_decision(_Reader(d, f"{s.where} decision {i}")) for i, d in enumerate(s.tables("decision"), 1)))
    s.done()
    if sim.max_turns < 1:
        raise ScenarioError(f"{s.where}: max_turns must be at least 1")
    if sim.expect_end and sim.expect_end not in ENDINGS:
        raise ScenarioError(f"{s.where}: expect_end is one of {', '.join(ENDINGS)}, not {sim.expect_end!r}")
    return sim


def _end_state(r: "_Reader") -> EndState:
    def rows(key: str):
        return [_Reader(t, f"{r.where} {key} {i}") for i, t in enumerate(r.tables(key), 1)]

    refunds = []
    for c in rows("refunds"):
        refunds.append((c.text("order", required=True), _money(c.text("amount", required=True), c.where)))
        c.done()
    notes = []
    for c in rows("seller_messages"):
        notes.append(SellerNote(order=c.text("order", required=True), seller=c.text("seller"),
                                contains=c.text("contains")))
        c.done()
    approvals = []
    for c in rows("approvals"):
        tool, decision = c.text("tool", required=True), c.text("decision", required=True)
        if decision not in END_DECISIONS:
            raise ScenarioError(f"{c.where}: decision is one of {', '.join(END_DECISIONS)}, not {decision!r}")
        approvals.append((tool, decision))
        c.done()
    escalations = []
    for c in rows("escalations"):
        escalations.append(c.text("contains"))
        c.done()
    must_tell = r.strings("must_tell")
    if any(not fact.strip() for fact in must_tell):
        raise ScenarioError(f"{r.where}: must_tell has an empty fact")
    status = r.text("conversation_status") or None
    if status is not None and status not in CONVERSATION_STATUSES:
        raise ScenarioError(f"{r.where}: conversation_status is one of {', '.join(CONVERSATION_STATUSES)}, "
                            f"not {status!r}")
    end = EndState(refunds=tuple(refunds), seller_messages=tuple(notes), approvals=tuple(approvals),
                   escalations=tuple(escalations), conversation_status=status, must_tell=must_tell)
    r.done()
    return end


def _copilot(r: "_Reader") -> CopilotExpect:
    suggests = r.text("suggests")
    if suggests not in ("", "refund", "seller_message"):
        raise ScenarioError(f'{r.where}: suggests is "refund" or "seller_message", not {suggests!r}')
    end = _end_state(_Reader(r.table("end_state"), f"{r.where} end_state")) if "end_state" in r.data else None
    expect = CopilotExpect(draft_cites=r.text("draft_cites"), suggests=suggests, end_state=end)
    r.done()
    return expect


def _servers(r: "_Reader") -> tuple[str, ...]:
    names = r.strings("mcp_servers")
    unknown = sorted(set(names) - set(MCP_SERVERS))
    if unknown:
        raise ScenarioError(f"{r.where}: mcp_servers may name {', '.join(MCP_SERVERS)}; not {', '.join(unknown)}")
    return tuple(dict.fromkeys(names))


def _policy_paths(r: "_Reader", folder: Path) -> tuple[str, ...]:
    out = []
    for given in r.strings("import_policies"):
        path = (folder / given).resolve()
        if not given or not path.exists():
            raise ScenarioError(f"{r.where}: import_policies: no file or folder {given!r} (read from {folder})")
        out.append(str(path))
    return tuple(out)


def _turn(r: "_Reader") -> Turn:
    attach = r.strings("attach")
    if any(kind not in ATTACHABLE for kind in attach):
        raise ScenarioError(f"{r.where}: attach takes {', '.join(ATTACHABLE)}, not {', '.join(attach)}")
    email = r.text("email")
    if email not in EMAIL_KINDS:
        raise ScenarioError(f"{r.where}: email is one of {', '.join(repr(k) for k in EMAIL_KINDS)}, not {email!r}")
    turn = Turn(say=r.text("say", required=True), after_hours=r.number("after_hours", 0.0), attach=attach, email=email,
                decisions=tuple(_decision(_Reader(d, f"{r.where} decision {i}"))
                                for i, d in enumerate(r.tables("decision"), 1)),
                expect=_expect(_Reader(r.table("expect"), f"{r.where} expect")) if "expect" in r.data else Expect())
    r.done()
    return turn


def _decision(r: "_Reader") -> Decision:
    action = r.text("action", required=True)
    if action not in ACTIONS:
        raise ScenarioError(f"{r.where}: action must be one of {', '.join(ACTIONS)}, not {action!r}")
    decision = Decision(tool=r.text("tool", required=True), action=action, arguments=r.table("arguments"),
                        reason=r.text("reason"), confirm_seen=r.boolean("confirm_seen", True), refused=r.text("refused"))
    if action == "reject" and not decision.reason:
        raise ScenarioError(f"{r.where}: a rejection needs a reason")
    if action == "edit" and not decision.arguments:
        raise ScenarioError(f"{r.where}: an edit needs the arguments it changes")
    if decision.refused and decision.refused not in REFUSALS:
        raise ScenarioError(f"{r.where}: refused must be one of {', '.join(REFUSALS)}")
    r.done()
    return decision


def _expect(r: "_Reader") -> Expect:
    def rules(key: str) -> tuple[CallRule, ...]:
        out = []
        for i, t in enumerate(r.tables(key), 1):
            c = _Reader(t, f"{r.where} {key} {i}")
            rule = CallRule(tool=c.text("tool", required=True), args=c.table("args"), match=c.table("match"))
            for pattern in rule.match.values():
                _regex(pattern, c.where)
            c.done()
            out.append(rule)
        return tuple(out)

    def pairs(key: str, first: str, second: str, money: bool = False) -> tuple | None:
        if key not in r.data:
            return None
        out = []
        for i, t in enumerate(r.tables(key), 1):
            c = _Reader(t, f"{r.where} {key} {i}")
            a, b = c.text(first, required=True), c.text(second, required=money)
            if money:
                b = _money(b, c.where)
            c.done()
            out.append((a, b))
        return tuple(out)

    expect = Expect(
        status=r.text("status") or None, stop_reason=r.text("stop_reason") or None, outcome=r.text("outcome") or None,
        calls=rules("calls"), no_calls=rules("no_calls"), call_order=r.strings("call_order"),
        says=r.strings("says"), says_match=tuple(_regex(p, r.where) for p in r.strings("says_match")),
        never_says=r.strings("never_says"),
        refunds=pairs("refunds", "order", "amount", money=True),
        seller_messages=pairs("seller_messages", "order", "contains"),
        approvals=pairs("approvals", "tool", "decision"),
        store_credits=pairs("store_credits", "order", "amount", money=True),
        policies_read=_policies_read(r),
        conversation_status=r.text("conversation_status") or None,
        max_model_calls=r.integer("max_model_calls", None), max_tokens=r.integer("max_tokens", None),
        max_prompt_tokens_per_call=r.integer("max_prompt_tokens_per_call", None),
        max_cost_usd=r.number("max_cost_usd", None),
    )
    r.done()
    return expect


def _policies_read(r: "_Reader") -> tuple[tuple[str, int | None], ...]:
    out = []
    for i, t in enumerate(r.tables("policies_read"), 1):
        c = _Reader(t, f"{r.where} policies_read {i}")
        out.append((c.text("doc_id", required=True), c.integer("version", None)))
        c.done()
    return tuple(out)


def _regex(pattern: str, where: str) -> str:
    try:
        re.compile(pattern)
    except re.error as e:
        raise ScenarioError(f"{where}: {pattern!r} is not a valid regular expression ({e})") from e
    return pattern


def _money(value: str, where: str) -> str:
    try:
        return f"{Decimal(value):.2f}"
    except InvalidOperation as e:
        raise ScenarioError(f"{where}: amount {value!r} is not a number") from e


class _Reader:
    """Typed access to one TOML table; done() names any key nobody read (a typo in a criterion would
    otherwise be a criterion silently never checked)."""

    def __init__(self, data, where: str):
        if not isinstance(data, dict):
            raise ScenarioError(f"{where}: expected a table")
        self.data, self.where, self.read = data, where, set()

    def _get(self, key, kinds, what):
        self.read.add(key)
        value = self.data.get(key)
        if value is not None and not isinstance(value, kinds):
            raise ScenarioError(f"{self.where}: {key} must be {what}")
        return value

    def text(self, key: str, required: bool = False) -> str:
        value = self._get(key, str, "text")
        if required and not value:
            raise ScenarioError(f"{self.where}: {key} is required")
        return value or ""

    def strings(self, key: str) -> tuple[str, ...]:
        value = self._get(key, list, "a list of texts") or []
        if not all(isinstance(v, str) for v in value):
            raise ScenarioError(f"{self.where}: {key} must be a list of texts")
        return tuple(value)

    def integer(self, key: str, default):
        value = self._get(key, int, "a whole number")
        return default if value is None else value

    def number(self, key: str, default):
        value = self._get(key, (int, float), "a number")
        return default if value is None else float(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self._get(key, bool, "true or false")
        return default if value is None else value

    def table(self, key: str) -> dict:
        return dict(self._get(key, dict, "a table") or {})

    def tables(self, key: str) -> list:
        value = self._get(key, list, "an array of tables ([[...]])") or []
        return value

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.read)
        if unknown:
            raise ScenarioError(f"{self.where}: unknown key(s) {', '.join(unknown)}")
