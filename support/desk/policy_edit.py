"""Policies written in the staff console: a new policy, or a new version of one, saved exactly as an import
or an admin edit is (policy_import.save_policy), named `console: <username>` with the editor's note of what
changed. A save from a version that is no longer the latest is refused: nothing is overwritten unseen.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from support.desk import permissions
from support.desk.policy_import import save_policy
from support.desk.policy_sources import Refused, Source
from support.models import PolicyDocument

CHANGED_BY = "console"  # PolicyVersion.changed_by is "console: <username>"
NOTE_MAX = 200


@dataclass(frozen=True)
class PolicyDraft:
    """What an editor submitted: the whole policy as it should read, and a short note of what changed."""

    title: str
    body: str
    seller_code: str  # empty: a Sundry-wide policy; else that seller's supplement
    note: str


@dataclass(frozen=True)
class PolicySaved:
    doc_id: str
    version: int
    outcome: str  # "added", "updated" or "unchanged" (the same words: no new version)


def changed_by(user) -> str:
    return f"{CHANGED_BY}: {user.get_username()}"


def new_doc_id(title: str) -> str:
    """A doc_id for a policy begun in the console: readable from its title, never one that exists."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-").upper()[:26] or "POLICY"
    return f"POL-{slug}-{secrets.token_hex(4).upper()}"


def policy_save(*, user, doc_id: str, draft: PolicyDraft, based_on: int) -> PolicySaved | Refused:
    """A new version of `doc_id` from `based_on`, the version the editor opened."""
    refusal = permissions.policy_edit_refusal(user)
    if refusal is not None:
        return Refused(doc_id, "forbidden", refusal)
    source = PolicyDocument.objects.filter(doc_id=doc_id).values_list("source", flat=True).first()
    return _save(user, doc_id, draft, source or CHANGED_BY, based_on)


def policy_create(*, user, draft: PolicyDraft) -> PolicySaved | Refused:
    refusal = permissions.policy_edit_refusal(user)
    if refusal is not None:
        return Refused("", "forbidden", refusal)
    return _save(user, new_doc_id(draft.title), draft, CHANGED_BY, 0)


def _save(user, doc_id: str, draft: PolicyDraft, source: str, based_on: int) -> PolicySaved | Refused:
    outcome = save_policy(Source(doc_id, draft.title, draft.body, source, draft.seller_code),
                          changed_by(user), note=draft.note[:NOTE_MAX], based_on=based_on)
    if isinstance(outcome, Refused):
        return outcome
    # based_on was the latest under the row's lock, so the version saved follows from it.
    return PolicySaved(doc_id, based_on + (outcome != "unchanged"), outcome)
