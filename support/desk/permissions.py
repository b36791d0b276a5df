"""Who among the staff may do what, when a staff socket must close, and the record of every refusal.

Any active staff account (is_staff) may read: the console, the staff API's lists and conversations, the
staff socket. Deciding is narrower:
  - approving or rejecting a gated call needs `support.decide_approval`;
  - approving a refund above LARGE_REFUND_THRESHOLD (default 100.00) also needs
    `support.approve_large_refund` (rejecting one needs only the first);
  - a refund above SECOND_APPROVAL_ABOVE (0: off) needs two different people, whatever their permissions:
    the agent's, approved by two, or a staff member's own, approved by another (support/desk/gate.py);
  - exporting the audit of decisions and staff actions needs `support.export_audit`;
  - seeing the team's queue by person (/console/team/, GET /api/staff/team-queue) needs
    `support.view_team_queue`;
  - editing, publishing and rolling back the agent profile (/api/staff/profile/..., docs/api.md) needs
    `support.change_agent_profile`;
  - inviting staff and changing their role, team and access (/console/team/, support/team/) needs
    `support.manage_team`; seeing the desk's settings (/console/settings/) needs `support.view_desk_settings`.
Any staff member may read the shop's policies in the console; writing one (a new policy or a new version)
needs `support.edit_policies` (docs/policies.md).
Groups (created by migration 0007, and again by ensure_groups()): "Support agents" have decide_approval,
"Support leads" have all eight (edit_policies from migration 0016, export_audit from 0018, view_team_queue
from 0019, change_agent_profile from 0024, manage_team and view_desk_settings from 0026). Both see the shop
and desk records in the admin (view permissions, migration 0008); leads may also edit customers, sellers and
policy texts there. Superusers have every permission.

Refusals that matter for security (a 403 on a staff endpoint, a refused or revoked staff socket) are
logged as WARNING on the `support.security` logger with the user, the client address and the reason.
"""

from __future__ import annotations

import hashlib
import logging
from decimal import Decimal, InvalidOperation
from importlib import import_module

from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, get_user_model, user_logged_out
from django.db import transaction
from django.db.models import Q
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils.crypto import constant_time_compare

from support import profiles
from support.tools import mcp

security_log = logging.getLogger("support.security")

DECIDE_APPROVAL = "support.decide_approval"
APPROVE_LARGE_REFUND = "support.approve_large_refund"
EDIT_POLICIES = "support.edit_policies"
EXPORT_AUDIT = "support.export_audit"
VIEW_TEAM_QUEUE = "support.view_team_queue"
CHANGE_AGENT_PROFILE = profiles.CHANGE_AGENT_PROFILE  # "support.change_agent_profile"
MANAGE_TEAM = "support.manage_team"
VIEW_DESK_SETTINGS = "support.view_desk_settings"
# codename -> (the model whose content type holds it, its name); migrations 0007, 0016, 0018, 0024 and 0026 write
# the same.
PERMISSIONS = {
    "decide_approval": ("approval", "Can approve or reject the agent's gated actions"),
    "approve_large_refund": ("approval", "Can approve refunds above the large-refund threshold"),
    "edit_policies": ("policydocument", "Can edit the shop's policies in the staff console"),
    "export_audit": ("approval", "Can export the audit of decisions and staff actions"),
    "view_team_queue": ("team", "Can see the team's queue by person"),
    "change_agent_profile": ("profileversion", "Can edit and publish the agent profile"),
    "manage_team": ("team", "Can invite staff and change their roles, teams and access"),
    "view_desk_settings": ("team", "Can see the desk's settings"),
}
AGENTS, LEADS = "Support agents", "Support leads"
# What staff may see in the admin (/admin/): every shop and desk record, read-only; leads may also edit the
# texts a shop keeps up by hand. Refunds, approvals and the transcript stay read-only for everyone
# (support/admin.py): editing them would bypass the desk's rules. Django's own view_/change_ permissions.
ADMIN_VIEWABLE = ("customer", "seller", "order", "orderitem", "charge", "parcel", "scan", "policydocument",
                  "refund", "sellermessage", "conversation", "message", "run", "step", "toolcall", "approval",
                  "inboxevent", "inboundemail")
LEAD_EDITABLE = ("customer", "seller", "policydocument")
_VIEW = [f"view_{model}" for model in ADMIN_VIEWABLE]
GROUPS = {AGENTS: ["decide_approval", *_VIEW],
          LEADS: ["decide_approval", "approve_large_refund", "edit_policies", "export_audit", "view_team_queue",
                  "change_agent_profile", "manage_team", "view_desk_settings", *_VIEW, *(f"change_{m}" for m in LEAD_EDITABLE)]}

REVOKED = 4403  # the close code of a staff socket refused or revoked (docs/events.md)


def large_refund_threshold() -> Decimal:
    return Decimal(str(settings.LARGE_REFUND_THRESHOLD))  # a test or a shell may set it as text


def recheck_seconds() -> float:
    """The longest a staff socket goes without checking its session and account again."""
    return settings.STAFF_SOCKET_RECHECK_SECONDS


# -- deciding approvals ---------------------------------------------------------------------------------

def refund_amount(tool: str, arguments) -> Decimal | None:
    """The amount a call would refund: issue_refund's, or a gated MCP tool's amount field (None: not a refund,
    or no readable amount, which the tool's schema refuses before anything runs)."""
    field = "amount" if tool in ("issue_refund", "staff_refund") else mcp.amount_field(tool)  # an MCP tool's, if named
    if field is None or not isinstance(arguments, dict):
        return None
    try:
        amount = Decimal(str(arguments.get(field)))
    except (InvalidOperation, TypeError, ValueError):
        return None
    return amount if amount.is_finite() else None


def is_large_refund(tool: str, arguments) -> bool:
    """A refund above the threshold. Arguments without a readable amount are not: the tool's schema refuses
    them before anything runs (a 400, which says more than a 403 would)."""
    amount = refund_amount(tool, arguments)
    return amount is not None and amount > large_refund_threshold()


def second_approval_above() -> Decimal | None:
    """SECOND_APPROVAL_ABOVE (or the live profile's lower threshold), or None when four eyes are off (0 or unset)."""
    limit = profiles.effective_limits().second_approval_above
    return limit if limit > 0 else None


def needs_second_approver(tool: str, arguments) -> bool:
    """A refund above SECOND_APPROVAL_ABOVE: two different people must approve it (the amount as it would run)."""
    limit, amount = second_approval_above(), refund_amount(tool, arguments)
    return limit is not None and amount is not None and amount > limit


def decision_refusal(user, *, tool: str, approve: bool, arguments) -> str | None:
    """Why `user` may not make this decision, in plain words; None when they may. `arguments`: what would run."""
    if not user.has_perm(DECIDE_APPROVAL):
        return ("Your account may read approvals but not decide them: that needs the permission "
                f"“decide approvals” ({DECIDE_APPROVAL}), which the {AGENTS} and {LEADS} groups have.")
    if approve and is_large_refund(tool, arguments) and not user.has_perm(APPROVE_LARGE_REFUND):
        return (f"Refunds above {large_refund_threshold()} need a support lead to approve them (permission "
                f"{APPROVE_LARGE_REFUND}, group {LEADS}). You may lower the amount or reject it.")
    return None


def deciders() -> list:
    """The team: active staff who may decide approvals (reminded of one nobody has, support/desk/nudges.py)."""
    users = get_user_model().objects.filter(is_active=True, is_staff=True).order_by("pk")
    return [u for u in users if u.has_perm(DECIDE_APPROVAL)]


def leads() -> list:
    """The support leads: active staff in the LEADS group, and superusers (told of an approval still waiting
    at APPROVAL_ESCALATE_AT of its time, support/desk/nudges.py)."""
    users = get_user_model().objects.filter(is_active=True, is_staff=True)
    return list(users.filter(Q(groups__name=LEADS) | Q(is_superuser=True)).distinct().order_by("pk"))


def viewer_json(user) -> dict:
    """What the console may offer this staff member; the API enforces the same rules."""
    limit = second_approval_above()
    return {"username": user.get_username(), "can_decide": user.has_perm(DECIDE_APPROVAL),
            "can_approve_large_refunds": user.has_perm(APPROVE_LARGE_REFUND),
            "large_refund_threshold": str(large_refund_threshold()),
            "second_approval_above": str(limit) if limit is not None else None,
            "can_export_audit": user.has_perm(EXPORT_AUDIT), "can_view_team_queue": user.has_perm(VIEW_TEAM_QUEUE),
            "can_change_agent_profile": user.has_perm(CHANGE_AGENT_PROFILE)}


def policy_edit_refusal(user) -> str | None:
    """Why `user` may not write a policy, in plain words; None when they may."""
    if user.has_perm(EDIT_POLICIES):
        return None
    return ("Your account may read the policies but not change them: that needs the permission “edit policies” "
            f"({EDIT_POLICIES}), which the {LEADS} group has.")


def profile_change_refusal(user) -> str | None:
    """Why `user` may not read the draft or change the agent profile, in plain words; None when they may."""
    if user.has_perm(CHANGE_AGENT_PROFILE):
        return None
    return ("Your account may not change the agent profile: that needs the permission “change the agent profile” "
            f"({CHANGE_AGENT_PROFILE}), which the {LEADS} group has.")


def ensure_groups() -> dict:
    """Our permissions and the two groups, created when missing (a flushed test database, an old one)."""
    from django.contrib.auth.models import Group, Permission
    from django.contrib.contenttypes.models import ContentType

    # One read when they are all there (every seed_demo of the tests, every start of a site); made when missing.
    there = {(p.content_type.model, p.codename): p for p in Permission.objects.select_related("content_type").filter(
        content_type__app_label="support", codename__in=PERMISSIONS)}
    perms = {}
    for codename, (model, name) in PERMISSIONS.items():
        perms[codename] = there.get((model, codename))
        if perms[codename] is None:
            content_type, _ = ContentType.objects.get_or_create(app_label="support", model=model)
            perms[codename] = Permission.objects.get_or_create(content_type=content_type, codename=codename,
                                                               defaults={"name": name})[0]
    perms.update(_model_permissions({c for codenames in GROUPS.values() for c in codenames} - set(perms)))
    groups = {}
    for name, codenames in GROUPS.items():
        groups[name], _ = Group.objects.get_or_create(name=name)
        groups[name].permissions.add(*(perms[c] for c in codenames))
    return groups


def _model_permissions(codenames) -> dict:
    """Django's view_/change_ permissions of our models, created when missing (post_migrate makes them, but
    a test database flushed between tests may not have them yet)."""
    from django.apps import apps
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType

    found = {p.codename: p for p in Permission.objects.filter(content_type__app_label="support",
                                                               codename__in=codenames)}
    for codename in sorted(set(codenames) - set(found)):
        action, model_name = codename.split("_", 1)
        model = apps.get_model("support", model_name)
        found[codename] = Permission.objects.get_or_create(
            content_type=ContentType.objects.get_for_model(model), codename=codename,
            defaults={"name": f"Can {action} {model._meta.verbose_name}"})[0]
    return found


# -- refusals on record ---------------------------------------------------------------------------------

def who(user) -> str:
    if user is None or not getattr(user, "is_authenticated", False):
        return "anonymous"
    return f"{user.get_username()} (id {user.pk})"


def log_refusal(user, address: str | None, reason: str) -> None:
    security_log.warning("refused %s from %s: %s", who(user), address or "unknown address", reason)


def request_address(request) -> str:
    return request.META.get("REMOTE_ADDR", "")


def scope_address(scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else ""


# -- staff sockets: who may keep one open ---------------------------------------------------------------

def staff_user_group(user_id) -> str:
    """The channel-layer group every staff socket of one user joins, so logging out closes them at once."""
    return f"staff.user.{user_id}"


def session_tag(session_key: str | None) -> str:
    """A session's name in a revoke event: a hash, so the key itself never travels through the layer."""
    return hashlib.sha256((session_key or "").encode()).hexdigest()[:32]


def staff_session_problem(session_key: str | None, user_id) -> str | None:
    """Why a staff socket opened on this session for this user must close now; None while all is well.

    Read afresh each time: the account (gone, deactivated, no longer staff), then the session (logged out,
    expired, or the password changed since, which Django's own check on every request would also refuse).
    """
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        return "the account was deleted"
    if not user.is_active:
        return "the account was deactivated"
    if not user.is_staff:
        return "the account is no longer staff"
    if not session_key:
        return "the socket has no session"
    data = import_module(settings.SESSION_ENGINE).SessionStore(session_key).load()  # {} once gone or expired
    if str(data.get(SESSION_KEY)) != str(user.pk):
        return "the session ended (logged out or expired)"
    stored = data.get(HASH_SESSION_KEY) or ""
    hashes = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    if not any(constant_time_compare(stored, h) for h in hashes):
        return "the password changed since the session began"
    return None


def revoke_staff_sockets(user_id, *, session_key: str | None = None, reason: str) -> None:
    """Ask every staff socket of the user to check itself now; those of `session_key` close at once.

    Never raises: a layer that is down loses only the immediacy (each socket checks again within
    STAFF_SOCKET_RECHECK_SECONDS anyway)."""
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    event = {"type": "staff.revoke", "reason": reason,
             "session": session_tag(session_key) if session_key else None}
    try:
        async_to_sync(get_channel_layer().group_send)(staff_user_group(user_id), event)
    except Exception:
        security_log.warning("staff sockets of user id %s not told to close (%s); they close within %g s",
                             user_id, reason, recheck_seconds(), exc_info=True)


@receiver(user_logged_out, dispatch_uid="support.desk.permissions.logged_out")
def _close_sockets_on_logout(sender, request, user, **kwargs):
    if user is not None:
        session_key = getattr(getattr(request, "session", None), "session_key", None)
        revoke_staff_sockets(user.pk, session_key=session_key, reason="logged out")


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="support.desk.permissions.account_changed")
def _close_sockets_of_revoked_accounts(sender, instance, created, **kwargs):
    # After the commit: a socket that checks before it would still read the account as it was.
    if not created and (not instance.is_active or not instance.is_staff):
        user_id = instance.pk
        transaction.on_commit(lambda: revoke_staff_sockets(user_id, reason="account deactivated or no longer staff"))
