"""The copilot beside the person who has a conversation: a draft, a summary, a suggested next step, an answer;
read tools only, nothing to the customer, traced and costed, and a draft's use recorded when it is sent.

Who: Maya is the customer; Sam (a support agent) has taken her conversation over after the agent handed it on.
The model is the stand-in, which scripts the copilot's answers (standin/copilot.py)."""

import json
from decimal import Decimal

import pytest

from support import copilot, tasks
from support.desk import services
from support.live import events
from support.models import Conversation, CopilotRun, Message, PolicyDocument
from tests.copilot_factories import ask, copilot_queued, disputed, handed_over, sam  # noqa: F401  (fixtures)
from tests.desk_factories import make_user
from tests.mcp_fixture import mcp_server  # noqa: F401  (fixture: the demo warranty service)

pytestmark = pytest.mark.django_db(transaction=True)

READ_TOOLS = {"get_order", "track_parcel", "search_policy"}


def offered_tools(standin) -> set[str]:
    specs = [json.loads(text) for text in standin.sent() if text.startswith("{")]
    return {spec["function"]["name"] for spec in specs if isinstance(spec, dict) and "function" in spec}


def test_a_draft_is_offered_only_tools_that_read_and_cites_the_order_and_the_policy_version(
        desk, queued, copilot_queued, sam, standin):
    conversation = handed_over(queued, desk.maya, sam)
    refunds = PolicyDocument.objects.get(doc_id="POL-REFUND")
    refunds.version = 3  # edited twice since it was imported
    refunds.save()
    standin.reset()
    run = ask(conversation, sam, "draft")
    assert run.status == CopilotRun.DONE, run.error
    assert offered_tools(standin) == READ_TOOLS  # no refund, seller message, hand-over, nor record_outcome
    assert "480.00 EUR" in run.text and "SU-41533" in run.text
    policies = [s for s in run.sources if s["kind"] == "policy"]
    assert {"kind": "order", "id": "SU-41533", "label": "SU-41533 (delivered)"} in run.sources
    assert policies[0] == {"kind": "policy", "id": "POL-REFUND", "label": "Refunds", "version": 3}
    assert "Refunds (version 3)" in run.text


def test_a_suggestion_adds_only_its_own_tool_and_runs_nothing(desk, queued, copilot_queued, sam, standin):
    conversation = handed_over(queued, desk.maya, sam)
    before = Message.objects.filter(conversation=conversation).count()
    standin.reset()
    run = ask(conversation, sam, "suggest")
    assert offered_tools(standin) == READ_TOOLS | {"suggest_action"}
    assert run.suggestion == {"action": "refund", "order_id": "SU-41533", "amount": "480.00",
                              "reason": run.suggestion["reason"]}
    assert "per Refunds (version" in run.suggestion["reason"]
    desk.orders["SU-41533"].refresh_from_db()
    assert desk.orders["SU-41533"].refunds.count() == 0
    assert Message.objects.filter(conversation=conversation).count() == before


def test_a_gated_tool_a_profile_marks_or_a_tool_with_a_hold_policy_is_never_offered(desk, queued, copilot_queued,
                                                                                     sam, standin, monkeypatch):
    from dataclasses import replace

    from support.copilot import tools as copilot_tools
    from support.desk import assistant

    real = assistant.tools
    monkeypatch.setattr(copilot_tools.assistant, "tools", lambda profile=None: [
        replace(t, gated=True) if t.name == "track_parcel" else t for t in real(profile)])
    conversation = handed_over(queued, desk.maya, sam)
    standin.reset()
    ask(conversation, sam, "draft")
    assert offered_tools(standin) == {"get_order", "search_policy"}


def test_a_draft_never_reaches_the_customer_until_it_is_sent(desk, queued, copilot_queued, sam, monkeypatch, client):
    conversation = handed_over(queued, desk.maya, sam)
    before = list(Message.objects.filter(conversation=conversation).values_list("pk", flat=True))
    sent = []
    monkeypatch.setattr(events.publisher, "send", lambda groups, event: sent.append((groups, event)))
    run = ask(conversation, sam, "draft")
    assert run.status == CopilotRun.DONE and run.text
    assert list(Message.objects.filter(conversation=conversation).values_list("pk", flat=True)) == before
    customer_group = events.conversation_group(conversation.public_id)
    assert sent and not [event for groups, event in sent if customer_group in groups]
    client.force_login(sam)
    client.post(f"/api/staff/conversations/{conversation.public_id}/messages",
                {"text": run.text, "draft": str(run.public_id)}, content_type="application/json")
    assert Message.objects.filter(conversation=conversation, content=run.text, author=Message.STAFF).count() == 1


def test_its_text_streams_to_the_staffs_group_only(desk, queued, copilot_queued, sam, monkeypatch):
    conversation = handed_over(queued, desk.maya, sam)
    sent = []
    monkeypatch.setattr(events.publisher, "send", lambda groups, event: sent.append((groups, event)))
    run = ask(conversation, sam, "draft")
    staff_group = events.staff_conversation_group(conversation.public_id)
    assert sent and all(groups == [staff_group] for groups, _ in sent)
    deltas = [e for _, e in sent if e["type"] == "copilot.delta"]
    assert "".join(e["text"] for e in deltas).endswith(run.text)
    assert {(e["copilot"], e["kind"]) for e in deltas} == {(str(run.public_id), "draft")}
    done = [e for _, e in sent if e["type"] == "copilot.done"]
    assert [d["copilot"]["text"] for d in done] == [run.text]


def test_a_run_is_traced_and_costed_at_the_models_prices(desk, queued, copilot_queued, sam, settings):
    settings.MODEL_PRICES = {settings.MODEL_NAME: (2.0, 8.0, 0.5)}
    conversation = handed_over(queued, desk.maya, sam)
    run = ask(conversation, sam, "draft")
    models = [s for s in run.trace if s["kind"] == "model"]
    tools = [s for s in run.trace if s["kind"] == "tool"]
    assert [s["tool"] for s in tools] == ["get_order", "search_policy"]
    assert tools[0]["arguments"] == {"order_id": "SU-41533"} and '"total": "480.00"' in tools[0]["result"]
    assert len(models) == 3 and run.prompt_tokens == sum(s["prompt_tokens"] for s in models) > 0
    assert run.completion_tokens == sum(s["completion_tokens"] for s in models) > 0
    cached = sum(s["cached_tokens"] for s in models)
    expected = ((run.prompt_tokens - cached) * 2.0 + cached * 0.5 + run.completion_tokens * 8.0) / 1_000_000
    assert run.cached_tokens == cached and run.cost_usd == Decimal(str(round(expected, 6))) > 0
    assert not conversation.runs.filter(pk__gt=0).exclude(stop_reason__in=("escalated", "taken_over")).exists()


def test_a_sent_draft_records_the_reply_and_how_much_the_person_changed(desk, queued, copilot_queued, sam, client):
    conversation = handed_over(queued, desk.maya, sam)
    run = ask(conversation, sam, "draft")
    client.force_login(sam)
    edited = run.text.replace("Thank you for your patience.", "Thanks for waiting.")
    response = client.post(f"/api/staff/conversations/{conversation.public_id}/messages",
                           {"text": edited, "draft": str(run.public_id)}, content_type="application/json")
    assert response.status_code == 201
    run.refresh_from_db()
    assert run.sent_message.content == edited and run.sent_message.author == Message.STAFF
    assert run.edit_distance > 0 and run.sent_unchanged is False
    again = client.post(f"/api/staff/conversations/{conversation.public_id}/messages",
                        {"text": edited, "draft": str(run.public_id)}, content_type="application/json")
    assert again.status_code == 409 and "sent already" in again.json()["error"]


def test_a_draft_sent_as_written_is_recorded_unchanged(desk, queued, copilot_queued, sam, client):
    conversation = handed_over(queued, desk.maya, sam)
    run = ask(conversation, sam, "draft")
    client.force_login(sam)
    client.post(f"/api/staff/conversations/{conversation.public_id}/messages",
                {"text": run.text, "draft": str(run.public_id)}, content_type="application/json")
    run.refresh_from_db()
    assert run.edit_distance == 0 and run.sent_unchanged is True


def test_a_summary_is_kept_for_later_readers_and_the_hand_over_and_goes_stale(desk, queued, copilot_queued, sam,
                                                                             client):
    conversation = handed_over(queued, desk.maya, sam)
    run = ask(conversation, sam, "summary")
    assert run.text.startswith("Wants:") and "Done: The agent handed over a refund of 480.00 EUR" in run.text
    alex = make_user("alex", staff=True, first_name="Alex")
    client.force_login(alex)
    seen = client.get(f"/api/staff/conversations/{conversation.public_id}/copilot").json()
    assert seen["summary"]["id"] == str(run.public_id) and seen["runs"] == []  # Alex asked for nothing
    assert seen["summary"]["requested_by"] == {"username": "sam", "name": "Sam"} and not seen["summary"]["stale"]
    handover = client.get(f"/api/staff/conversations/{conversation.public_id}/handover").json()
    assert handover["summary"]["text"] == run.text
    services.conversation_post_message(conversation=conversation, text="Any news?")
    seen = client.get(f"/api/staff/conversations/{conversation.public_id}/copilot").json()
    assert seen["summary"]["stale"] is True


def test_a_question_is_answered_from_the_policies_with_citations(desk, queued, copilot_queued, sam):
    conversation = handed_over(queued, desk.maya, sam)
    run = ask(conversation, sam, "ask", "What is the agent refund limit?")
    assert run.status == CopilotRun.DONE and run.text.startswith("According to Refunds (version")
    assert any(s["kind"] == "policy" and s["id"] == "POL-REFUND" for s in run.sources)


def test_the_disputed_refund_gets_a_draft_quoting_the_reviewers_reason(desk, queued, copilot_queued, sam):
    conversation = disputed(queued, desk.maya, sam)
    run = ask(conversation, sam, "draft")
    assert "declined the refund of 64.00 EUR because: The tea towels were used" in run.text
    suggestion = ask(conversation, sam, "suggest").suggestion
    assert suggestion["action"] == "refund" and suggestion["order_id"] == "SU-41310"
    assert suggestion["amount"] == "64.00"


def test_a_model_failure_ends_the_run_failed_in_plain_words(desk, queued, copilot_queued, sam, standin, settings):
    settings.MODEL_MAX_RETRIES = 0
    conversation = handed_over(queued, desk.maya, sam)
    standin.queue_faults(["500"] * 3)
    run = ask(conversation, sam, "draft")
    assert run.status == CopilotRun.FAILED and run.error.startswith("The model could not answer")
    assert run.finished_at is not None and run.text == ""


def test_our_own_failure_ends_the_run_failed_never_running(desk, queued, copilot_queued, sam, monkeypatch):
    conversation = handed_over(queued, desk.maya, sam)

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("support.copilot.tools.for_run", broken)
    run = ask(conversation, sam, "draft")
    assert run.status == CopilotRun.FAILED and "failed unexpectedly (RuntimeError)" in run.error
    assert copilot.copilot_execute(run.pk) == "not claimed"  # a duplicate delivery does nothing


def test_the_sweep_fails_runs_whose_worker_died(desk, queued, copilot_queued, sam):
    from datetime import timedelta

    from django.utils import timezone

    conversation = handed_over(queued, desk.maya, sam)
    old = copilot.copilot_start(conversation=conversation, user=sam, kind="summary")
    fresh = copilot.copilot_start(conversation=conversation, user=sam, kind="summary")
    CopilotRun.objects.filter(pk=old.pk).update(status=CopilotRun.RUNNING,
                                                created_at=timezone.now() - timedelta(minutes=11))
    assert tasks.sweep()["copilot_runs_failed"] == 1  # the beat's sweep
    old.refresh_from_db()
    fresh.refresh_from_db()
    assert old.status == CopilotRun.FAILED and "did not finish within 10 minutes" in old.error
    assert fresh.status == CopilotRun.QUEUED
    assert tasks.sweep()["copilot_runs_failed"] == 0


def test_the_task_the_desk_queues_by_name_works_the_run(desk, queued, copilot_queued, sam):
    from agentsite.celery import app
    from support.desk import queue

    conversation = handed_over(queued, desk.maya, sam)
    run = copilot.copilot_start(conversation=conversation, user=sam, kind="summary")
    assert copilot_queued == [run.pk] and queue.RUN_COPILOT in app.tasks
    assert app.tasks[queue.RUN_COPILOT](run.pk) == "done"
    assert tasks.run_copilot(run.pk) == "not claimed"


def test_the_console_reads_this_persons_runs_newest_first(desk, queued, copilot_queued, sam, client):
    conversation = handed_over(queued, desk.maya, sam)
    first = ask(conversation, sam, "ask", "What is the agent refund limit?")
    second = ask(conversation, sam, "draft")
    client.force_login(sam)
    seen = client.get(f"/api/staff/conversations/{conversation.public_id}/copilot").json()
    assert [r["id"] for r in seen["runs"]] == [str(second.public_id), str(first.public_id)]
    shown = seen["runs"][0]
    assert shown["status"] == "done" and shown["steps"][0]["tool"] == "get_order" and shown["duration_ms"] >= 0
    assert set(shown) >= {"id", "kind", "status", "question", "text", "sources", "suggestion", "error",
                          "requested_by", "created_at", "finished_at", "duration_ms", "prompt_tokens",
                          "completion_tokens", "cached_tokens", "cost_usd", "steps", "stale"}
    assert seen["summary"] is None and Conversation.objects.get(pk=conversation.pk).status == "taken_over"


def test_an_mcp_tool_is_offered_only_when_its_server_says_it_only_reads(desk, queued, copilot_queued, sam, standin,
                                                                        mcp_server, settings):
    # lookup_warranty: readOnlyHint true; get_order (listed as warranty__get_order): listed "read" but its server
    # says nothing; issue_store_credit: gated.
    settings.MCP_SERVERS = mcp_server.setting(lookup_warranty={"kind": "read"}, get_order={"kind": "read"},
                                              issue_store_credit={"kind": "gated", "amount": "amount",
                                                                  "order": "order_number"})
    conversation = handed_over(queued, desk.maya, sam)
    standin.reset()
    ask(conversation, sam, "draft")
    assert offered_tools(standin) == READ_TOOLS | {"lookup_warranty"}
    assert mcp_server.credits == []


def test_a_draft_is_asked_for_in_the_customers_language_in_place_of_the_agents_prompt(desk, queued, copilot_queued,
                                                                                      sam, standin):
    conversation = handed_over(queued, desk.maya, sam)
    Conversation.objects.filter(pk=conversation.pk).update(language="de")
    standin.reset()
    ask(conversation, sam, "draft")
    prompts = [text for text in standin.sent() if text.startswith("You are the copilot of Sundry's support desk")]
    assert len(prompts) == 1 and "Write it in German (de)" in prompts[0] and "Copilot task: draft." in prompts[0]
    assert not [text for text in standin.sent() if text.startswith("You are Sundry's customer support agent")]
