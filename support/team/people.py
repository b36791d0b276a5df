"""Roles, teams and access of staff accounts, changed by a person with `support.manage_team`, each change a
TeamChange row (the audit). Roles are the groups the permissions already use (agent, lead) and admin, a
superuser. Rules, in code: only an admin makes or changes an admin; nobody changes their own role or deactivates
themselves; the last active admin, and the last active person who may manage the team, keep their rights.
Deactivating ends the person's sessions and, through the account's post_save (desk/permissions.py), their
staff sockets."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module

from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user_model
from django.db import transaction
from django.db.models import Q

from support.customers.words import staff_name
from support.desk import permissions
from support.live import presence
from support.models import Team, TeamChange

AGENT, LEAD, ADMIN = "agent", "lead", "admin"
ROLES = (AGENT, LEAD, ADMIN)
ROLE_GROUPS = {AGENT: permissions.AGENTS, LEAD: permissions.LEADS, ADMIN: permissions.LEADS}


class Refused(Exception):
    """A change the rules do not allow, in a plain sentence for the person who asked; `status` for the page."""

    def __init__(self, message: str, status: int = 409):
        super().__init__(message)
        self.message, self.status = message, status


def role_of(user) -> str:
    """"admin" (a superuser), "lead", "agent", or "" for a staff account in neither group."""
    if user.is_superuser:
        return ADMIN
    names = {g.name for g in user.groups.all()}
    return LEAD if permissions.LEADS in names else AGENT if permissions.AGENTS in names else ""


def _describe(user) -> dict:
    return {"role": role_of(user), "teams": [t.name for t in user.support_teams.all()], "active": user.is_active}


def record(*, by, event: str, person=None, invitation=None, before=None, after=None) -> TeamChange:
    return TeamChange.objects.create(by=by, event=event, person=person, invitation=invitation,
                                     before=before or {}, after=after or {})


def require_manager(user) -> None:
    if not user.has_perm(permissions.MANAGE_TEAM):
        raise Refused("Your account may not manage the team: that needs the permission “manage the team” "
                      f"({permissions.MANAGE_TEAM}), which the {permissions.LEADS} group has.", 403)


def _active_staff():
    return get_user_model().objects.filter(is_active=True, is_staff=True)


def _managers_left_without(person) -> int:
    """Active staff other than `person` who may manage the team (leads and admins)."""
    others = _active_staff().exclude(pk=person.pk)
    return others.filter(Q(is_superuser=True) | Q(groups__name=permissions.LEADS)).distinct().count()


def _check_may_change(*, by, person, losing_rights: bool) -> None:
    require_manager(by)
    if person.pk == by.pk:
        raise Refused("You cannot change your own role or access here: ask another lead or an admin.")
    if person.is_superuser and not by.is_superuser:
        raise Refused(f"{staff_name(person)} is an admin: only an admin may change an admin's role or access.", 403)
    if losing_rights and person.is_superuser and not _active_staff().filter(is_superuser=True).exclude(
            pk=person.pk).exists():
        raise Refused(f"{staff_name(person)} is the last active admin: make someone else admin first.")
    if losing_rights and role_of(person) in (LEAD, ADMIN) and _managers_left_without(person) == 0:
        raise Refused(f"{staff_name(person)} is the last active person who may manage the team: "
                      "make someone else a lead first.")


def apply_role(user, role: str) -> None:
    """The groups and flags of a role (no checks: for the services here and the demo's seeding)."""
    groups = permissions.ensure_groups()
    user.is_staff = True
    user.is_superuser = role == ADMIN
    user.save()
    user.groups.remove(groups[permissions.AGENTS], groups[permissions.LEADS])
    user.groups.add(groups[ROLE_GROUPS[role]])


def person_role_set(*, by, person, role: str) -> None:
    if role not in ROLES:
        raise Refused("Choose a role: agent, lead or admin.", 400)
    if role == ADMIN and not by.is_superuser:
        raise Refused("Only an admin may make someone an admin.", 403)
    before = _describe(person)
    losing = before["role"] in (LEAD, ADMIN) and role == AGENT or before["role"] == ADMIN and role != ADMIN
    _check_may_change(by=by, person=person, losing_rights=losing)
    if before["role"] == role:
        return
    with transaction.atomic():
        apply_role(person, role)
        record(by=by, event=TeamChange.ROLE, person=person, before={"role": before["role"]}, after={"role": role})


def person_team_set(*, by, person, team: Team | None) -> None:
    """The person's team: exactly this one (or none)."""
    _check_may_change(by=by, person=person, losing_rights=False)
    before = _describe(person)["teams"]
    after = [team.name] if team is not None else []
    if before == after:
        return
    with transaction.atomic():
        person.support_teams.set([team] if team is not None else [])
        record(by=by, event=TeamChange.TEAM, person=person, before={"teams": before}, after={"teams": after})


def person_deactivate(*, by, person) -> None:
    """Inactive: no sign-in, every session ended now, staff sockets closed (post_save, after the commit)."""
    if person.pk == by.pk:
        raise Refused("You cannot deactivate your own account: ask another lead or an admin.")
    _check_may_change(by=by, person=person, losing_rights=True)
    if not person.is_active:
        return
    with transaction.atomic():
        person.is_active = False
        person.save()
        record(by=by, event=TeamChange.DEACTIVATED, person=person, before={"active": True}, after={"active": False})
    sessions_end(person)


def person_reactivate(*, by, person) -> None:
    _check_may_change(by=by, person=person, losing_rights=False)
    if person.is_active:
        return
    with transaction.atomic():
        person.is_active = True
        person.save()
        record(by=by, event=TeamChange.REACTIVATED, person=person, before={"active": False}, after={"active": True})


def sessions_end(person) -> int:
    """Delete every stored session of the person (sessions live in the database); the number ended."""
    store = import_module(settings.SESSION_ENGINE).SessionStore
    model = store.get_model_class()
    ended = 0
    for session in model.objects.all().iterator():
        if str(store().decode(session.session_data).get(SESSION_KEY)) == str(person.pk):
            session.delete()
            ended += 1
    return ended


@dataclass(frozen=True)
class Person:
    username: str
    name: str
    email: str
    role: str
    teams: list
    active: bool
    online: bool
    last_login: object
    is_viewer: bool


def people(viewer) -> list[Person]:
    """Every staff account, active first, then by name: role, teams, online now, last signed in."""
    online = presence.online_user_ids()
    users = get_user_model().objects.filter(is_staff=True).prefetch_related("groups", "support_teams")
    found = [Person(username=u.get_username(), name=staff_name(u), email=u.email, role=role_of(u),
                    teams=[t.name for t in u.support_teams.all()], active=u.is_active, online=u.pk in online,
                    last_login=u.last_login, is_viewer=u.pk == viewer.pk) for u in users]
    return sorted(found, key=lambda p: (not p.active, p.name.casefold()))


def person_by_username(username) -> object:
    user = get_user_model().objects.filter(username=str(username or "")[:150], is_staff=True).first()
    if user is None:
        raise Refused("There is no staff account of that name.", 404)
    return user
