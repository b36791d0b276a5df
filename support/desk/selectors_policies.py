"""Reads for the console's policy pages: every policy with its last change, one policy's versions, and the
differences between two versions (by line, and by word within a changed line)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db.models import F

from support.models import PolicyDocument, PolicyVersion, Seller

# How a version was saved, from PolicyVersion.changed_by ("import", "admin: sam", "console: sam", ...).
HOW = {"import": "Import", "admin": "Admin", "console": "Console", "before": "As first set up"}


@dataclass(frozen=True)
class Change:
    """One saved version, told for people."""

    version: int
    how: str  # a key of HOW, or what changed_by said when it is none of them
    who: str  # the person's name (their first name when the account has one); empty for an import
    username: str
    at: datetime
    note: str

    @property
    def how_label(self) -> str:
        return HOW.get(self.how, self.how)

    @property
    def how_key(self) -> str:  # for the page's styles: only our own words
        return self.how if self.how in HOW else "other"


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "same", "removed", "added" or "gap" (unchanged lines left out)
    parts: tuple[tuple[bool, str], ...] = ()  # (changed, text): the words changed within a changed line


def policy_by_doc_id(doc_id: str) -> PolicyDocument | None:
    return PolicyDocument.objects.select_related("seller").filter(doc_id=doc_id).first()


def policy_rows() -> list[dict]:
    """Sundry-wide policies first, then each seller's supplements; each with its latest change, if kept."""
    docs = list(PolicyDocument.objects.select_related("seller")
                .order_by(F("seller__name").asc(nulls_first=True), "title", "doc_id"))
    latest = list(PolicyVersion.objects.filter(doc__in=docs, version=F("doc__version")))
    changes = dict(zip([v.doc_id for v in latest], _changes(latest)))  # by the document's pk
    return [{"doc": doc, "change": changes.get(doc.pk)} for doc in docs]


def policy_history(doc: PolicyDocument) -> list[Change]:
    """Every version kept, the latest first."""
    return _changes(doc.versions.order_by("-version"))


def policy_version(doc: PolicyDocument, version: int) -> tuple[PolicyVersion, Change] | None:
    kept = doc.versions.filter(version=version).first()
    return (kept, _changes([kept])[0]) if kept is not None else None


def latest_change(doc: PolicyDocument) -> Change | None:
    kept = doc.versions.filter(version=doc.version).first()
    return _changes([kept])[0] if kept is not None else None


def seller_choices(current: Seller | None = None) -> list[tuple[str, str]]:
    """Whom a policy may apply to: all of Sundry, or one marketplace seller (a supplement)."""
    sellers = Seller.objects.filter(is_sundry=False).order_by("name")
    choices = [("", "All of Sundry (every order)")]
    choices += [(s.code, f"{s.name} ({s.code}): supplement") for s in sellers]
    if current is not None and current.code not in {code for code, _ in choices}:
        choices.append((current.code, f"{current.name} ({current.code}): supplement"))
    return choices


def _changes(versions) -> list[Change]:
    versions = list(versions)
    parsed = [_parse(v.changed_by) for v in versions]
    users = get_user_model().objects.filter(username__in={name for _, name in parsed if name})
    names = {u.get_username(): u.get_short_name() or u.get_username() for u in users}
    return [Change(v.version, how, names.get(username, username), username, v.imported_at, v.note)
            for v, (how, username) in zip(versions, parsed)]


def _parse(changed_by: str) -> tuple[str, str]:
    """("console", "sam") from "console: sam"; ("before", "") from "before versions" (policy_import.py)."""
    how, sep, username = changed_by.partition(": ")
    if not sep:
        return ("before" if changed_by == "before versions" else changed_by), ""
    return how, username


# -- differences ------------------------------------------------------------------------------------------

def policy_text(title: str, seller_code: str, body: str) -> str:
    """A version as one text to compare: what it is called, whom it applies to, what it says."""
    return f"Title: {title}\nApplies to: {seller_code or 'all of Sundry'}\n\n{body}"


def policy_diff(old: str, new: str, context: int = 2) -> list[DiffLine]:
    """The lines removed and added (with `context` unchanged lines around them); empty when they are the same."""
    a, b = old.splitlines(), new.splitlines()
    lines: list[DiffLine] = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        if lines:
            lines.append(DiffLine("gap"))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [DiffLine("same", ((False, line),)) for line in a[i1:i2]]
                continue
            removed = [((False, line),) for line in a[i1:i2]]  # a line only removed or added is marked whole
            added = [((False, line),) for line in b[j1:j2]]
            for k in range(min(len(removed), len(added))):  # a line rewritten: mark the words that differ
                removed[k], added[k] = _word_diff(a[i1 + k], b[j1 + k])
            lines += [DiffLine("removed", parts) for parts in removed] + [DiffLine("added", parts) for parts in added]
    return lines


def _word_diff(old: str, new: str):
    a, b = re.split(r"(\s+)", old), re.split(r"(\s+)", new)
    old_parts, new_parts = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        changed = tag != "equal"
        if i2 > i1:
            old_parts.append((changed, "".join(a[i1:i2])))
        if j2 > j1:
            new_parts.append((changed, "".join(b[j1:j2])))
    return _runs(old_parts), _runs(new_parts)


def _runs(parts: list[tuple[bool, str]]) -> tuple[tuple[bool, str], ...]:
    """Neighbouring parts joined, and the spaces between two changed words counted as changed: "as store
    credit" reads as one change rather than three."""
    out: list[tuple[bool, str]] = []
    for i, (changed, text) in enumerate(parts):
        if not changed and not text.strip() and 0 < i < len(parts) - 1 and parts[i - 1][0] and parts[i + 1][0]:
            changed = True
        if out and out[-1][0] == changed:
            out[-1] = (changed, out[-1][1] + text)
        else:
            out.append((changed, text))
    return tuple(out)
