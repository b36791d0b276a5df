"""Teammates from the console: a lead invites a person by e-mail (a signed, single-use, expiring link to set a name
and password), gives and changes roles and teams, deactivates and reactivates people, and sees who is online.

Who may do what: Lee is a Support lead (support.manage_team); Ada is an admin (a superuser); Sam is a Support
agent, who may open none of it; a visitor who is not signed in is sent to the login. Every change is a row in the
audit and its export.
"""

from __future__ import annotations

import re
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.core import mail
from django.test import Client

from support.desk import audit, permissions
from support.live import presence
from support.models import StaffInvitation, Team, TeamChange
from support.team import invitations, people
from tests.desk_factories import make_user

HOSTILE = '<img src=x onerror="alert(1)">Eve'


@pytest.fixture
def lee(db):
    return make_user("lee", staff=True, group="leads", first_name="Lee")


@pytest.fixture
def sam(db):
    return make_user("sam", staff=True, first_name="Sam")


@pytest.fixture
def ada(db):
    user = make_user("ada", staff=True, group="leads", first_name="Ada")
    user.is_superuser = True
    user.save()
    return user


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def post(client, action, **data):
    return client.post(f"/console/team/{action}/", data)


def link_in(message) -> str:
    return re.search(r"http://\S+/console/join/(\S+?)/", message.body).group(0)


def path_of(link) -> str:
    return "/" + link.split("/", 3)[3]


# -- inviting ---------------------------------------------------------------------------------------------------

def test_it_sends_an_invitation_by_the_desks_mail_whose_link_makes_an_account_with_the_role_and_team(lee):
    support = Team.objects.create(name="Refunds")
    response = post(signed_in(lee), "invite", email="Nia@Example.com", role="agent", team="Refunds")
    assert response.status_code == 200 and b"Invitation sent to nia@example.com" in response.content
    [message] = mail.outbox
    assert message.to == ["nia@example.com"] and message.extra_headers["Auto-Submitted"] == "auto-generated"
    assert "Lee invites you" in message.subject
    link = path_of(link_in(message))
    assert b"join-name" in Client().get(link).content
    answer = Client().post(link, {"name": "Nia", "password": "a-long-Secret-42", "password_again": "a-long-Secret-42"})
    assert b"Your account is ready" in answer.content
    nia = get_user_model().objects.get(username="nia@example.com")
    assert nia.is_staff and nia.first_name == "Nia" and people.role_of(nia) == "agent"
    assert list(nia.support_teams.all()) == [support]
    assert Client().login(username="nia@example.com", password="a-long-Secret-42")


def test_a_link_works_once_and_a_second_use_says_so_plainly(lee):
    post(signed_in(lee), "invite", email="nia@example.com", role="agent")
    link = path_of(link_in(mail.outbox[0]))
    Client().post(link, {"name": "Nia", "password": "a-long-Secret-42", "password_again": "a-long-Secret-42"})
    again = Client().post(link, {"name": "Mallory", "password": "b-long-Secret-43", "password_again": "b-long-Secret-43"})
    assert again.status_code == 410 and b"This invitation was used already" in again.content
    assert get_user_model().objects.get(username="nia@example.com").first_name == "Nia"
    assert b"used already" in Client().get(link).content


def test_an_expired_link_opens_nothing(lee, settings):
    post(signed_in(lee), "invite", email="nia@example.com", role="agent")
    link = path_of(link_in(mail.outbox[0]))
    settings.STAFF_INVITATION_MAX_AGE = 60
    with mock.patch("django.core.signing.time.time", return_value=__import__("time").time() + 120):
        answer = Client().post(link, {"name": "Nia", "password": "a-long-Secret-42",
                                      "password_again": "a-long-Secret-42"})
    assert answer.status_code == 410 and b"has expired" in answer.content
    assert not get_user_model().objects.filter(username="nia@example.com").exists()


def test_a_resend_makes_the_earlier_link_useless_and_a_cancelled_invitation_opens_nothing(lee):
    client = signed_in(lee)
    post(client, "invite", email="nia@example.com", role="agent")
    first = path_of(link_in(mail.outbox[0]))
    invitation = StaffInvitation.objects.get()
    post(client, "resend", invitation=str(invitation.public_id))
    second = path_of(link_in(mail.outbox[1]))
    assert Client().get(first).status_code == 404 and Client().get(second).status_code == 200
    post(client, "cancel", invitation=str(invitation.public_id))
    answer = Client().get(second)
    assert answer.status_code == 404 and b"was cancelled" in answer.content


def test_an_address_with_an_account_is_refused_plainly_and_nothing_is_sent(lee, sam):
    sam.email = "sam@example.com"
    sam.save()
    response = post(signed_in(lee), "invite", email="SAM@example.com", role="agent")
    assert response.status_code == 409 and b"sam@example.com already has an account" in response.content
    assert mail.outbox == [] and not StaffInvitation.objects.exists()


def test_invitations_past_the_hourly_limit_are_refused(lee, settings):
    settings.STAFF_INVITATIONS_PER_HOUR = 2
    client = signed_in(lee)
    codes = [post(client, "invite", email=f"p{n}@example.com", role="agent").status_code for n in range(3)]
    assert codes == [200, 200, 429] and len(mail.outbox) == 2


def test_a_weak_password_or_two_different_ones_are_refused_in_plain_words(lee):
    post(signed_in(lee), "invite", email="nia@example.com", role="agent")
    link = path_of(link_in(mail.outbox[0]))
    differ = Client().post(link, {"name": "Nia", "password": "a-long-Secret-42", "password_again": "other"})
    assert differ.status_code == 400 and b"The two passwords differ" in differ.content
    weak = Client().post(link, {"name": "Nia", "password": "123", "password_again": "123"})
    assert weak.status_code == 400 and not get_user_model().objects.filter(username="nia@example.com").exists()


# -- roles and the admin rule -----------------------------------------------------------------------------------

def test_a_lead_cannot_make_or_invite_an_admin_and_an_admin_can(lee, sam, ada):
    assert post(signed_in(lee), "role", username="sam", role="admin").status_code == 403
    assert post(signed_in(lee), "invite", email="x@example.com", role="admin").status_code == 403
    assert not get_user_model().objects.get(username="sam").is_superuser
    assert post(signed_in(ada), "role", username="sam", role="admin").status_code == 200
    assert people.role_of(get_user_model().objects.get(username="sam")) == "admin"


def test_a_lead_may_change_an_agents_role_and_team_later(lee, sam):
    Team.objects.create(name="Night shift")
    client = signed_in(lee)
    assert post(client, "role", username="sam", role="lead").status_code == 200
    assert post(client, "team", username="sam", team="Night shift").status_code == 200
    sam.refresh_from_db()
    assert people.role_of(sam) == "lead" and sam.has_perm(permissions.MANAGE_TEAM)
    assert [t.name for t in sam.support_teams.all()] == ["Night shift"]


def test_a_lead_cannot_change_an_admin_nor_their_own_role(lee, ada):
    client = signed_in(lee)
    assert post(client, "deactivate", username="ada").status_code == 403
    response = post(client, "role", username="lee", role="agent")
    assert response.status_code == 409 and b"your own role" in response.content


def test_nobody_removes_their_own_rights_and_the_last_lead_keeps_theirs(lee, sam, ada):
    response = post(signed_in(ada), "role", username="ada", role="lead")
    assert response.status_code == 409 and b"your own role" in response.content
    ada.is_active = False
    ada.save()
    # Someone given the permission by hand (not a lead) tries to demote the only lead left.
    from django.contrib.auth.models import Permission
    sam.user_permissions.add(Permission.objects.get(codename="manage_team"))
    sam = get_user_model().objects.get(pk=sam.pk)
    refused = post(signed_in(sam), "role", username="lee", role="agent")
    assert refused.status_code == 409 and b"the last active person who may manage the team" in refused.content
    assert people.role_of(get_user_model().objects.get(username="lee")) == "lead"


# -- deactivation -----------------------------------------------------------------------------------------------

def test_deactivating_ends_every_session_and_closes_the_sockets_as_today(lee, sam, django_capture_on_commit_callbacks):
    samc = signed_in(sam)
    assert samc.get("/console/").status_code == 200
    with mock.patch.object(permissions, "revoke_staff_sockets") as revoke, \
            django_capture_on_commit_callbacks(execute=True):
        assert post(signed_in(lee), "deactivate", username="sam").status_code == 200
    revoke.assert_called_once_with(sam.pk, reason="account deactivated or no longer staff")
    assert not any(s.get_decoded().get("_auth_user_id") == str(sam.pk) for s in Session.objects.all())
    assert samc.get("/console/").status_code == 302  # to the login
    assert post(signed_in(lee), "reactivate", username="sam").status_code == 200
    assert get_user_model().objects.get(username="sam").is_active


def test_nobody_can_deactivate_themselves(lee):
    response = post(signed_in(lee), "deactivate", username="lee")
    assert response.status_code == 409 and b"your own account" in response.content
    assert get_user_model().objects.get(username="lee").is_active


# -- what the page shows ----------------------------------------------------------------------------------------

def test_the_page_shows_each_persons_role_team_and_whether_online(lee, sam):
    Team.objects.create(name="Refunds").members.add(sam)
    presence.mark_online(sam.pk, "tab-1")
    page = signed_in(lee).get("/console/team/").content.decode()
    row = re.search(r'data-testid="person-row" data-username="sam".*?</tr>', page, re.S).group(0)
    assert "Online now" in row and 'value="agent" selected' in row and 'value="Refunds" selected' in row


def test_hostile_names_are_shown_escaped_on_the_page_and_in_the_join_form(lee):
    sam = make_user("eve", staff=True, first_name=HOSTILE)
    Team.objects.create(name=HOSTILE)
    page = signed_in(lee).get("/console/team/").content.decode()
    assert HOSTILE not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;Eve" in page
    post(signed_in(lee), "invite", email="nia@example.com", role="agent", team=HOSTILE)
    form = Client().get(path_of(link_in(mail.outbox[0]))).content.decode()
    assert HOSTILE not in form and "&lt;img" in form
    assert HOSTILE not in mail.outbox[0].alternatives[0][0]
    assert sam.first_name == HOSTILE


# -- who may --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("action", sorted(["invite", "resend", "cancel", "role", "team", "deactivate", "reactivate"]))
def test_an_agent_may_use_no_team_endpoint_and_the_refusal_is_logged(lee, sam, action, caplog):
    invitation = invitations.invitation_send(by=lee, email="nia@example.com", role="agent", team=None)
    response = post(signed_in(sam), action, username="lee", role="agent", email="x@example.com",
                    invitation=str(invitation.public_id))
    assert response.status_code == 403
    assert "manage the team" in response.content.decode()
    assert any("refused sam" in r.getMessage() for r in caplog.records if r.name == "support.security")
    assert StaffInvitation.objects.get().open and get_user_model().objects.get(username="lee").is_active


def test_a_visitor_is_sent_to_the_login_and_a_get_changes_nothing(lee):
    assert Client().post("/console/team/invite/", {"email": "x@example.com", "role": "agent"}).status_code == 302
    assert signed_in(lee).get("/console/team/deactivate/").status_code == 405
    assert mail.outbox == []


def test_an_agent_sees_no_team_page(sam):
    assert signed_in(sam).get("/console/team/").status_code == 403


# -- the audit --------------------------------------------------------------------------------------------------

def test_every_change_is_a_row_in_the_audit_and_its_export(lee, sam):
    client = signed_in(lee)
    post(client, "invite", email="nia@example.com", role="agent")
    invitation = StaffInvitation.objects.get()
    post(client, "resend", invitation=str(invitation.public_id))
    join_path = path_of(link_in(mail.outbox[1]))
    Client().post(join_path, {"name": "Nia", "password": "a-long-Secret-42", "password_again": "a-long-Secret-42"})
    post(client, "role", username="sam", role="lead")
    post(client, "deactivate", username="sam")
    post(client, "reactivate", username="sam")
    rows = [r for r in audit.audit_rows(audit.AuditFilter()) if r["record"] == "team"]
    assert [r["event"] for r in rows] == ["invited", "invitation_resent", "joined", "role_changed", "deactivated",
                                          "reactivated"]
    role = rows[3]
    assert role["person"] == "lee" and role["other_person"] == "sam" and role["changed"] == "role"
    assert role["requested_arguments"] == {"role": "agent"} and role["executed_arguments"] == {"role": "lead"}
    export = "".join(audit.csv_lines(audit.audit_rows(audit.AuditFilter())))
    assert "role_changed" in export and "nia@example.com" in export
    assert TeamChange.objects.count() == 6


def test_the_demo_seeds_a_second_lead_with_a_known_password(db, settings):
    from django.core.management import call_command

    settings.DEBUG = True
    out = __import__("io").StringIO()
    call_command("demo_staff", stdout=out)
    assert "alex / sundry-demo-2" in out.getvalue()
    alex = get_user_model().objects.get(username="alex")
    assert alex.is_active and alex.is_staff and people.role_of(alex) == "lead"



def test_an_invitation_links_token_is_redacted_in_logs(lee):
    from support.ops.redaction import redacted_path

    invitations.invitation_send(by=lee, email="nia@example.com", role="agent", team=None)
    link = path_of(link_in(mail.outbox[0]))
    assert redacted_path(link) == "/console/join/[redacted]/"
