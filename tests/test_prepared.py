"""support/ops/prepared.py: a values() query compiled once, run with new values, gives what the ORM gives.

Each type the desk's prepared reads carry (UUIDs, datetimes, decimals, booleans, NULLs, text, counts) comes
back as the ORM's own values() returns it, on this test's database (the suite runs on SQLite and PostgreSQL);
the statement is compiled once; a placeholder that does not reach the parameters once is refused. If an
upgrade of Django changes the compiler parts Prepared reads, these fail.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Count, Exists, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.test.utils import CaptureQueriesContext

from support.desk import selectors, services
from support.models import Approval, Conversation, Message, Run
from support.ops.prepared import Prepared

pytestmark = pytest.mark.django_db


def _rich(pk):
    newest = Run.objects.filter(conversation=OuterRef("pk")).order_by("-created_at", "-pk")
    pending = (Approval.objects.filter(run__conversation=OuterRef("pk"), decided_at__isnull=True).order_by()
               .values("run__conversation").annotate(n=Count("pk")).values("n"))
    return (Conversation.objects.filter(pk=pk)
            .annotate(run_id_=Subquery(newest.values("public_id")[:1]),
                      run_cost=Subquery(newest.values("cost_usd")[:1]),
                      run_created=Subquery(newest.values("created_at")[:1]),
                      pending=Coalesce(Subquery(pending, output_field=IntegerField()), 0),
                      has_messages=Exists(Message.objects.filter(conversation=OuterRef("pk"))))
            .values("public_id", "status", "created_at", "assignee_id", "assignee__username", "run_id_", "run_cost",
                    "run_created", "pending", "has_messages"))


def test_rows_are_what_the_orms_values_gives_for_every_type(demo):
    staff = User.objects.create_user("rowan", first_name="Rowan", is_staff=True)
    full = services.conversation_start(customer=demo.maya)
    services.conversation_post_message(conversation=full, text="Where is SU-41210?")
    Run.objects.filter(conversation=full).update(cost_usd=Decimal("0.012345"))
    Conversation.objects.filter(pk=full.pk).update(assignee=staff)
    bare = Conversation.objects.create(customer=demo.tom)  # no message, no run, no assignee: NULLs and False
    prepared = Prepared(Conversation, _rich, "pk")
    for conversation in (full, bare, full):
        got = prepared.rows(pk=conversation.pk)
        assert got == list(_rich(conversation.pk)), conversation
    row = prepared.rows(pk=full.pk)[0]
    assert row["run_cost"] == Decimal("0.012345") and row["has_messages"] is True
    assert row["assignee__username"] == "rowan" and row["run_created"].tzinfo is not None
    assert str(row["run_id_"]) == str(Run.objects.get(conversation=full).public_id)
    assert prepared.rows(pk=bare.pk)[0]["has_messages"] is False and prepared.rows(pk=-1) == []


def test_the_statement_is_built_and_compiled_once_and_runs_as_any_query(demo):
    built = []

    def build(pk):
        built.append(pk)
        return _rich(pk)

    prepared = Prepared(Conversation, build, "pk")
    conversations = [services.conversation_start(customer=demo.maya) for _ in range(3)]
    with CaptureQueriesContext(connection) as queries:
        for conversation in conversations:
            assert prepared.rows(pk=conversation.pk)[0]["public_id"] == conversation.public_id
    assert len(built) == 1  # the placeholder's build, once
    # logged as Django's own queries are, the same statement each time
    assert len({q["sql"].replace(f'= {c.pk} ', "= ? ") for q, c in zip(queries, conversations)}) == 1
    assert len(queries) == 3


def test_a_placeholder_must_reach_the_parameters_once(demo):
    twice = Prepared(Conversation, lambda pk: Conversation.objects.filter(pk=pk).exclude(customer_id=pk).values("pk"),
                     "pk")
    with pytest.raises(ValueError, match="2 times"):
        twice.rows(pk=1)
    never = Prepared(Conversation, lambda pk: Conversation.objects.values("pk"), "pk")
    with pytest.raises(ValueError, match="0 times"):
        never.rows(pk=1)


def test_the_replays_state_is_the_conversations_as_the_orm_reads_it(demo):
    staff = User.objects.create_user("rowan", first_name="Rowan", is_staff=True)
    conversation = services.conversation_start(customer=demo.maya)
    services.conversation_post_message(conversation=conversation, text="My parcel SU-41310 never came.")
    run = Run.objects.get(conversation=conversation)
    Run.objects.filter(pk=run.pk).update(status=Run.AWAITING_APPROVAL)
    gate_call = services.message_append(conversation=conversation, author=Message.AGENT, wire={
        "role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "issue_refund", "arguments": '{"order_id": "SU-41310", "amount": "5.00", "reason": "lost"}'}}]})
    assert gate_call.seq == 3
    Approval.objects.create(run=run, tool_call=run.tool_calls.create(call_id="c1", name="issue_refund",
                                                                     arguments={}), requested_arguments={})
    Conversation.objects.filter(pk=conversation.pk).update(assignee=staff)
    stale = Conversation.objects.get(pk=conversation.pk)
    stale.last_seq = 0
    state = selectors.conversation_state(stale, newer_than=2)
    assert state == {"status": "open", "assignee": "Rowan", "pending_approvals": 1,
                     "run": {"id": str(run.public_id), "status": Run.AWAITING_APPROVAL, "stop_reason": None,
                             "outcome": None},
                     "newer": False}  # seq 3 is the agent's call: not the customer's to see
    assert stale.last_seq == 3 and stale.assignee == staff
    assert selectors.conversation_state(stale, newer_than=2, staff=True)["newer"] is True
    assert selectors.conversation_state(stale, newer_than=1)["newer"] is True  # the customer's message, seq 2


def _fields(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields} if obj is not None else None


@pytest.mark.parametrize("with_rows", [True, False])
def test_a_runs_start_read_is_the_run_as_select_related_reads_it(demo, with_rows, django_assert_num_queries):
    """run_read: the run, its conversation, customer, follow-up row and profile version from one prepared
    statement, each field as the ORM reads it, the relations cached (reading them asks nothing more); without
    a follow-up row or a profile version, each is None, cached as such."""
    from support.customers import notify
    from support.desk import run_start
    from support.models import ProfileVersion

    conversation = services.conversation_start(customer=demo.maya)
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    if with_rows:
        notify.set_time_zone(conversation, "Europe/Lisbon")
    else:
        Run.objects.filter(conversation=conversation).update(profile_version=None)
    run_id = Run.objects.get(conversation=conversation).pk
    expected = Run.objects.select_related("conversation__customer", "conversation__follow_up",
                                          "profile_version").get(pk=run_id)
    with django_assert_num_queries(1):
        run = run_start.run_read(run_id)
        assert _fields(run) == _fields(expected)
        assert _fields(run.conversation) == _fields(expected.conversation)
        assert _fields(run.conversation.customer) == _fields(expected.conversation.customer)
        follow_up = getattr(run.conversation, "follow_up", None)
        assert _fields(follow_up) == _fields(getattr(expected.conversation, "follow_up", None))
        assert _fields(run.profile_version) == _fields(expected.profile_version)
        assert notify.zone_of(run.conversation) == notify.zone_of(expected.conversation)
    assert (run.profile_version is not None) is with_rows and isinstance(run.profile_version, (ProfileVersion,
                                                                                              type(None)))
    assert (follow_up is not None) is with_rows and run.conversation.customer.email == "maya@example.com"
    assert run.has_approvals is False and (run.day_turns, run.day_prompt_tokens) == (0, 0)
    assert str(run.day_cost_usd) in ("0", "0.000000") and run.conversation.public_id == conversation.public_id


def test_a_text_placeholder_takes_any_text_as_a_value_never_as_sql(demo):
    """The e-mail of a shop's token goes into a prepared statement as a parameter: quotes, percent signs,
    backslashes and the placeholder's own look-alike are only text."""
    from support.models import Customer
    from support.ops.prepared import columns

    by_email = Prepared(Customer, lambda email: Customer.objects.filter(email=email).order_by("pk").values(
        *columns(Customer))[:1], text=("email",))
    odd = ["o'brien@example.com", "100%_sure@example.com", "back\\slash@example.com",
           "\x1fprepared email\x1f", "x' OR '1'='1"]
    made = {email: Customer.objects.create(email=email, name="Odd") for email in odd}
    for email, customer in made.items():
        assert [c.pk for c in by_email.instances(email=email)] == [customer.pk]
    assert by_email.instances(email="maya@example.com")[0] == demo.maya
    assert by_email.instances(email="MAYA@example.com") == [] and by_email.instances(email="%") == []


def test_a_runs_history_is_the_conversations_messages_as_the_orm_reads_them(demo, django_assert_num_queries):
    """attachments.messages_with_files: every field, has_files and the conversation, as the related manager with
    the annotation gives them, in one statement."""
    from support.customers import attachments

    conversation = services.conversation_start(customer=demo.maya)
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    services.message_append(conversation=conversation, author=Message.AGENT, wire={
        "role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "get_order", "arguments": '{"order_id": "SU-41210"}'}}]})
    expected = list(conversation.messages.annotate(has_files=attachments.has_files()).order_by("seq"))
    with django_assert_num_queries(1):
        got = attachments.messages_with_files(conversation)
        assert [_fields(m) for m in got] == [_fields(m) for m in expected] and len(got) == 3
        assert [m.has_files for m in got] == [m.has_files for m in expected] == [False, False, False]
        assert all(m.conversation is conversation for m in got) and got[2].tool_calls[0]["id"] == "c1"


def test_a_uuid_placeholder_finds_by_public_id_in_the_databases_own_form(demo, django_assert_num_queries):
    """A UUID goes to SQLite as its hex and to PostgreSQL as itself; the prepared statement binds each value so.
    The customer's socket reads its conversation this way, its customer with it."""
    import uuid

    from support.customers import identity

    conversation = services.conversation_start(customer=demo.maya)
    by_id = Prepared(Conversation, lambda public_id: Conversation.objects.filter(public_id=public_id).values(
        "pk", "public_id"), uuids=("public_id",))
    for value in (conversation.public_id, str(conversation.public_id), str(conversation.public_id).upper()):
        assert by_id.rows(public_id=value) == [{"pk": conversation.pk, "public_id": conversation.public_id}]
    assert by_id.rows(public_id=uuid.uuid4()) == []
    token = identity.conversation_token(conversation)
    with django_assert_num_queries(1):
        access = identity.access_for_token(token, str(conversation.public_id))
        assert access.conversation.pk == conversation.pk and access.conversation.customer.email == "maya@example.com"
    assert identity.access_for_token(token, str(uuid.uuid4())) is None
