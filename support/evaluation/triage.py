"""Why a trial failed, in one label: decided from its checks and its trace by fixed rules first, and, only when
EVALUATION_TRIAGE_MODEL names one, a judge model second (it may only name a label when the rules found nothing
sharper than partial_goal).

Labels, the first rule that applies winning:
  environment               the model endpoint failed (HTTP errors, timeouts) or the run crashed
  customer_fault            the simulated customer failed to answer or never ended the chat
  unintended_write          a refund, seller message, store credit or hand-over nobody expected
  missing_approval_request  a gated call the scenario expected was never put to staff
  wrong_arguments           the right tool with the wrong arguments (a refund of the wrong amount)
  wrong_tool                a tool called that should not be, or one expected never called
  partial_goal              the rest: something the customer should have got or been told is missing
"""

from __future__ import annotations

import json

from support.agent.types import Observer, Transcript
from support.desk import assistant

LABELS = ("environment", "customer_fault", "unintended_write", "missing_approval_request", "wrong_arguments",
          "wrong_tool", "partial_goal")
# Run stop reasons that say the model endpoint, the shop or our own code failed, not the agent's judgement.
BROKEN = ("model_error", "empty_reply", "quota_exceeded", "internal_error", "tool_unavailable")


def triage(record, judge=None) -> dict:
    """{"label", "why"} for a failed ScenarioRun (plus "judge" when a judge model gave its view)."""
    label, why = _rules(record)
    out = {"label": label, "why": why}
    if judge is not None and label == "partial_goal":
        said = _ask(judge, record, label)
        if said:
            out["judge"] = said
            if said.get("label") in LABELS:
                out["label"], out["why"] = said["label"], f"judge: {said.get('why', '')}".strip()
    return out


def _rules(record) -> tuple[str, str]:
    failed = [c for c in record.checks if not c.ok]
    broken = [r for r in record.stop_reasons if r in BROKEN]
    model_steps = [s for s in record.trace if s.get("kind") == "model" and s.get("error")]
    if record.error:
        return "environment", f"the run crashed: {record.error[:200]}"
    if broken or model_steps:
        error = model_steps[0]["error"][:200] if model_steps else ""
        return "environment", f"a run stopped as {broken[0] if broken else 'model_error'}" + (
            f": {error}" if error else "")
    if any(c.tag == "environment" for c in failed):
        c = next(c for c in failed if c.tag == "environment")
        return "environment", f"{c.name}: {c.detail}"[:300]
    if any(c.tag == "customer_fault" for c in failed):
        c = next(c for c in failed if c.tag == "customer_fault")
        return "customer_fault", f"{c.name}: {c.detail}"[:300]
    if record.customer_end == "never":
        return "customer_fault", "the simulated customer never ended the chat (it ran out of turns)"
    for label in LABELS[2:-1]:
        hits = [c for c in failed if c.tag == label]
        if hits:
            return label, "; ".join(f"{c.name}" + (f" ({c.detail})" if c.detail else "") for c in hits)[:300]
    if failed:
        return "partial_goal", "; ".join(c.name for c in failed)[:300]
    return "partial_goal", "no check failed, yet the trial did not pass"


JUDGE_PROMPT = """You label why an AI support agent failed a test conversation. Labels: {labels}.
Answer with one JSON object: {{"label": "<one label>", "why": "<one sentence>"}}."""


def _ask(judge, record, rule_label: str) -> dict | None:
    """The judge's {"label", "why"}, or None when it gave nothing usable. `judge(system, user) -> str`."""
    failed = "\n".join(f"- {c.name}: {c.detail}" for c in record.checks if not c.ok)
    said = "\n".join(f"{m['role']}: {m['content'][:300]}" for m in record.transcript
                     if m["role"] in ("user", "assistant") and m["content"])[-4000:]
    calls = "\n".join(f"{s['tool']}({s['arguments'][:120]}) -> {(s['error'] or s['result'])[:120]}"
                      for s in record.trace if s.get("kind") == "tool")[-2000:]
    try:
        answer = judge(JUDGE_PROMPT.format(labels=", ".join(LABELS)),
                       f"Failed checks:\n{failed}\n\nTool calls:\n{calls}\n\nConversation:\n{said}\n\n"
                       f"The fixed rules said: {rule_label}.")
        start, end = answer.find("{"), answer.rfind("}")
        value = json.loads(answer[start:end + 1])
    except Exception:  # noqa: BLE001 - a judge that fails leaves the rules' label
        return None
    if not isinstance(value, dict) or value.get("label") not in LABELS:
        return None
    return {"label": value["label"], "why": str(value.get("why", ""))[:300]}


def model_judge(model_name: str):
    """A judge on the configured endpoint (support.desk.assistant.model), asked once per failed trial."""
    client = assistant.model(model=model_name)

    def judge(system: str, user: str) -> str:
        reply = client.complete(Transcript([{"role": "system", "content": system},
                                            {"role": "user", "content": user}]),
                                [{"type": "function", "function": {
                                    "name": "label", "description": "Give the label.",
                                    "parameters": {"type": "object", "properties": {
                                        "label": {"type": "string", "enum": list(LABELS)},
                                        "why": {"type": "string"}}, "required": ["label", "why"]}}}],
                                Observer())
        for call in reply.tool_calls:
            if call.name == "label":
                return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
        return reply.content or ""
    return judge
