"""Routing: a hand-over or an approval request goes into the queue of the online team member with the fewest open
conversations, round-robin among equals; nobody online leaves it for everyone; a lead sees the queue by person.

Who may see what: Sam and Alex are Support agents (staff); Lee is a Support lead, who may see the team's queue
(support.view_team_queue); Chris has an account but is not staff. Only Lee may open /console/team/ and
GET /api/staff/team-queue; everyone else gets a 403 and sees nothing of it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from support.desk import routing, selectors_inbox, services, staff_actions, takeover
from support.live import presence
from support.models import Approval, Conversation, Message, Team
from tests.desk_factories import make_user, pending_refund_approval, start_conversation


@pytest.fixture
def sam(db):
    return make_user("sam", staff=True, first_name="Sam")


@pytest.fixture
def alex(db):
    return make_user("alex", staff=True, first_name="Alex")


@pytest.fixture
def lee(db):
    return make_user("lee", staff=True, group="leads", first_name="Lee")


def online(*users, tab="tab-1"):
    for user in users:
        presence.mark_online(user.pk, tab)


def hand_over(customer, reason="the agent handed this over") -> Conversation:
    conversation = start_conversation(customer)
    # The customer wrote (the inbox lists only conversations someone wrote in).
    services.message_append(conversation=conversation, author=Message.CUSTOMER,
                            wire={"role": "user", "content": "Where is SU-41210?"})
    services.conversation_flag(conversation_id=conversation.pk, reason=reason)
    conversation.refresh_from_db()
    return conversation


def done_with(conversation: Conversation) -> None:
    """A person dealt with it and gave it back: it no longer counts as anyone's open work."""
    Conversation.objects.filter(pk=conversation.pk).update(status=Conversation.OPEN, assignee=None)


# -- who gets it ----------------------------------------------------------------------------------------------

def test_a_hand_over_goes_to_the_online_member_with_the_fewest_open_conversations(demo, sam, alex, lee):
    online(sam, alex, lee)
    takeover.conversation_take_over(conversation=start_conversation(demo.maya), user=sam)
    takeover.conversation_take_over(conversation=start_conversation(demo.maya), user=lee)
    conversation = hand_over(demo.maya)
    assert conversation.routed_to == alex and conversation.routed_at is not None
    assert conversation.status == Conversation.NEEDS_ATTENTION and conversation.assignee is None  # not assigned


def test_conversations_routed_and_not_taken_count_as_open_work(demo, sam, alex):
    online(sam, alex)
    first = hand_over(demo.maya)
    second = hand_over(demo.maya)
    assert {first.routed_to, second.routed_to} == {sam, alex}


def test_among_equals_it_goes_round_robin(demo, sam, alex, lee):
    online(sam, alex, lee)
    order = []
    for _ in range(6):
        conversation = hand_over(demo.maya)
        order.append(conversation.routed_to.username)
        done_with(conversation)  # everyone back at zero open: only the turn decides
    assert sorted(order[:3]) == ["alex", "lee", "sam"]
    assert order[3:] == order[:3]


def test_offline_members_are_skipped(demo, sam, alex):
    online(alex)
    takeover.conversation_take_over(conversation=start_conversation(demo.maya), user=alex)
    assert hand_over(demo.maya).routed_to == alex  # more open work, but the only one online


def test_a_member_whose_presence_lapsed_is_offline(demo, sam, alex, settings):
    online(sam, alex)
    presence.limits.store().zadd(presence.KEY, {f"{sam.pk}:tab-1": 1})  # a mark that lapsed long ago
    assert presence.online_user_ids() == {alex.pk}
    assert hand_over(demo.maya).routed_to == alex


def test_with_nobody_online_it_stays_unrouted_for_everyone_until_someone_comes_online(demo, sam, alex):
    conversation = hand_over(demo.maya)
    approval = pending_refund_approval(start_conversation(demo.maya))
    routing.approval_route(approval=approval)
    assert conversation.routed_to is None and Approval.objects.get(pk=approval.pk).routed_to is None
    row = selectors_inbox.inbox_row(sam, conversation.public_id)
    assert row["routed_to"] is None and row["status"] == "needs_person"

    online(sam)
    assert routing.route_waiting() == 2
    conversation.refresh_from_db()
    assert conversation.routed_to == sam and Approval.objects.get(pk=approval.pk).routed_to == sam
    assert routing.route_waiting() == 0  # nothing routed twice


def test_flagged_again_while_it_waits_it_stays_in_the_queue_it_is_in(demo, sam, alex):
    online(sam)
    conversation = hand_over(demo.maya)
    assert conversation.routed_to == sam
    online(alex)  # now alex has fewer
    services.conversation_flag(conversation_id=conversation.pk, reason="approval expired: too late")
    conversation.refresh_from_db()
    assert conversation.routed_to == sam


def test_a_conversation_someone_has_is_not_routed(demo, sam, alex):
    online(alex)
    conversation = start_conversation(demo.maya)
    takeover.conversation_take_over(conversation=conversation, user=sam)
    Conversation.objects.filter(pk=conversation.pk).update(status=Conversation.NEEDS_ATTENTION)
    assert routing.conversation_route(conversation_id=conversation.pk) is None
    conversation.refresh_from_db()
    assert conversation.routed_to is None


# -- teams ----------------------------------------------------------------------------------------------------

def test_with_a_team_only_its_members_receive_hand_overs(demo, sam, alex):
    team = Team.objects.create(name="Returns", takes_approvals=False)
    team.members.add(sam)
    online(sam, alex)
    takeover.conversation_take_over(conversation=start_conversation(demo.maya), user=sam)
    assert hand_over(demo.maya).routed_to == sam  # alex has less, but is not in a team that takes hand-overs


def test_with_no_team_taking_approvals_everyone_who_may_decide_is_the_team(demo, sam, alex):
    Team.objects.create(name="Returns", takes_approvals=False).members.add(sam)
    chris = make_user("chris", staff=True, group=None)  # staff, but may not decide approvals
    online(alex, chris)
    approval = pending_refund_approval(start_conversation(demo.maya))
    assert routing.approval_route(approval=approval) == alex


def test_team_members_who_are_not_staff_any_more_are_skipped(demo, sam, alex):
    team = Team.objects.create(name="Returns")
    team.members.add(sam, alex)
    sam.is_staff = False
    sam.save()
    online(sam, alex)
    assert hand_over(demo.maya).routed_to == alex


# -- approvals ------------------------------------------------------------------------------------------------

def test_an_approval_request_is_routed_without_assigning_the_conversation(demo, sam, alex):
    online(sam)
    conversation = start_conversation(demo.maya)
    approval = pending_refund_approval(conversation)
    assert routing.approval_route(approval=approval) == sam
    approval.refresh_from_db()
    conversation.refresh_from_db()
    assert approval.routed_to == sam and approval.pending
    assert conversation.assignee is None and conversation.status == Conversation.OPEN  # the agent still waits
    row = selectors_inbox.inbox(sam, filter_="routed_to_me").rows
    assert [r["id"] for r in row] == [str(conversation.public_id)]


def test_a_large_refund_is_routed_to_someone_who_may_approve_it(demo, sam, lee, settings):
    settings.LARGE_REFUND_THRESHOLD = "50.00"
    online(sam, lee)
    takeover.conversation_take_over(conversation=start_conversation(demo.maya), user=lee)
    approval = pending_refund_approval(start_conversation(demo.maya))  # 64.00: a lead's to approve
    assert routing.approval_route(approval=approval) == lee


def test_a_staff_refund_waiting_for_a_second_person_is_never_routed_to_the_one_who_asked(demo, sam, alex, settings,
                                                                                          queued):
    settings.SECOND_APPROVAL_ABOVE = "10.00"
    settings.LARGE_REFUND_THRESHOLD = "1000.00"
    online(sam, alex)
    conversation = start_conversation(demo.maya)
    for _ in range(3):  # sam has more open work than alex
        takeover.conversation_take_over(conversation=start_conversation(demo.maya), user=sam)
    action = staff_actions.refund_issue(conversation=conversation, user=alex, order_id="SU-41310",
                                        amount="20.00", reason="missing", key="k1")
    assert action.approval.routed_to == sam


# -- where it shows ---------------------------------------------------------------------------------------------

def test_inbox_rows_say_whose_queue_a_conversation_is_in_until_someone_has_it(demo, sam, alex):
    online(sam)
    conversation = hand_over(demo.maya)
    row = selectors_inbox.inbox_row(alex, conversation.public_id)
    assert row["routed_to"] == {"username": "sam", "name": "Sam"} and row["assignee"] is None
    assert selectors_inbox.inbox_counts(sam)["routed_to_me"] == 1
    assert selectors_inbox.inbox_counts(alex)["routed_to_me"] == 0
    assert [r["id"] for r in selectors_inbox.inbox(sam, filter_="routed_to_me").rows] == [str(conversation.public_id)]
    assert selectors_inbox.inbox(alex, filter_="routed_to_me").rows == []

    takeover.conversation_take_over(conversation=conversation, user=alex)
    row = selectors_inbox.inbox_row(sam, conversation.public_id)
    assert row["routed_to"] is None and row["assignee"]["username"] == "alex"
    assert selectors_inbox.inbox(sam, filter_="routed_to_me").rows == []


def test_the_approval_card_says_whose_queue_it_is_in(demo, sam):
    from support.desk import serializers

    online(sam)
    approval = pending_refund_approval(start_conversation(demo.maya))
    routing.approval_route(approval=approval)
    card = serializers.approval_json(Approval.objects.get(pk=approval.pk))
    assert card["routed_to"] == {"username": "sam", "name": "Sam"} and card["routed_at"]


# -- the team's queue, for leads ------------------------------------------------------------------------------

def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def test_a_lead_sees_the_queue_by_person(demo, sam, alex, lee):
    online(sam, alex)
    first = hand_over(demo.maya)
    takeover.conversation_take_over(conversation=start_conversation(demo.maya), user=lee)
    approval = pending_refund_approval(start_conversation(demo.maya))
    routing.approval_route(approval=approval)
    Conversation.objects.filter(pk=first.pk).update(routed_at=timezone.now() - timedelta(minutes=30))

    answer = client_for(lee).get("/api/staff/team-queue")
    assert answer.status_code == 200
    body = answer.json()
    people = {row["person"]["username"]: row for row in body["people"]}
    assert set(people) == {"sam", "alex", "lee"}
    assert [row["online"] for row in body["people"]] == [True, True, False]  # online first
    routed_first = people[first.routed_to.username]
    assert routed_first["routed_conversations"] == 1 and routed_first["open_conversations"] == 1
    assert routed_first["oldest_waiting_since"] == (
        Conversation.objects.get(pk=first.pk).routed_at.isoformat().replace("+00:00", "Z"))
    other = people[Approval.objects.get(pk=approval.pk).routed_to.username]
    assert other["pending_approvals"] == 1 and other is not routed_first
    assert people["lee"]["assigned"] == 1 and people["lee"]["online"] is False
    assert body["online"] == 2 and body["unrouted"] == {"conversations": 0, "pending_approvals": 0}

    page = client_for(lee).get("/console/team/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-testid="team-row" data-username="sam" data-online="true"' in html
    assert 'data-username="lee" data-online="false"' in html
    assert "2 of 3 online." in html


def test_the_team_page_counts_what_waits_unrouted(demo, lee):
    hand_over(demo.maya)
    body = client_for(lee).get("/api/staff/team-queue").json()
    assert body["unrouted"] == {"conversations": 1, "pending_approvals": 0} and body["online"] == 0
    page = client_for(lee).get("/console/team/").content.decode()
    assert "Waiting for anyone: 1 conversation needing a person" in page


def test_an_agent_may_not_see_the_team_queue(demo, sam, caplog):
    answer = client_for(sam).get("/api/staff/team-queue")
    assert answer.status_code == 403 and "support.view_team_queue" in answer.json()["error"]
    assert "people" not in answer.json()
    page = client_for(sam).get("/console/team/")
    assert page.status_code == 403 and 'data-testid="team-table"' not in page.content.decode()
    assert 'data-testid="team-refused"' in page.content.decode()
    assert any("team" in r.getMessage() and "sam" in r.getMessage() for r in caplog.records
               if r.name == "support.security")


def test_non_staff_and_anonymous_may_not_see_the_team_queue(demo):
    chris = make_user("chris", staff=False)
    for client in (client_for(chris), client_for(None)):
        answer = client.get("/api/staff/team-queue")
        assert answer.status_code == 403 and "people" not in answer.content.decode()
        assert client.get("/console/team/").status_code == 302  # to the login page


def test_only_leads_see_the_team_link(demo, sam, lee):
    assert 'data-testid="nav-team"' in client_for(lee).get("/console/").content.decode()
    assert 'data-testid="nav-team"' not in client_for(sam).get("/console/").content.decode()


def test_with_teams_the_queue_lists_their_members_only(demo, sam, alex, lee):
    Team.objects.create(name="Returns", takes_approvals=False).members.add(sam)
    Team.objects.create(name="Refunds", takes_handovers=False).members.add(alex, sam)
    body = client_for(lee).get("/api/staff/team-queue").json()
    assert [(row["person"]["username"], row["teams"]) for row in body["people"]] == [
        ("alex", ["Refunds"]), ("sam", ["Refunds", "Returns"])]  # Lee is in no team
    assert body["teams_configured"] is True
