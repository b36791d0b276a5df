"""Saving policies, imported (`manage.py import_policies`) or edited (the admin, the console's editor): one
transaction per document, a new version only when the title, body or seller changed, and every version kept
in PolicyVersion.

The sources are read by policy_sources.py; this module decides added, updated, unchanged or refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from django.db import transaction

from support.desk.policy_sources import Refused, Source, from_path, from_shop, from_url, new_client
from support.models import PolicyDocument, PolicyVersion, Seller
from support.shop import shop

CHANGED_BY = "import"


@dataclass
class ImportReport:
    added: list[str] = field(default_factory=list)  # doc_ids
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)

    def summary(self) -> str:
        return (f"added {len(self.added)}, updated {len(self.updated)}, unchanged {len(self.unchanged)}, "
                f"refused {len(self.refused)}")


def read_sources(args: Iterable[str]) -> Iterator[Source | Refused]:
    """Each argument in turn: an http(s) URL, anything else with a scheme (refused), or a path."""
    client = None
    try:
        for arg in args:
            if arg.lower().startswith(("http://", "https://")):
                client = client or new_client()
                yield from from_url(arg, client)
            elif "://" in arg:
                yield Refused(arg, "fetch_failed", "only http and https addresses are fetched")
            else:
                yield from from_path(arg)
    finally:
        if client is not None:
            client.close()


def import_policies(args: Iterable[str], changed_by: str = CHANGED_BY) -> ImportReport:
    return save_all(read_sources(args), changed_by)


def import_shop_policies(changed_by: str) -> ImportReport | None:
    """The shop's own policies, read where the shop itself serves them (through the port: the shop contract's
    GET /policies, Shopify's shop policies), never from an address or a path anyone typed. None: this shop
    serves none. Raises ShopUnavailable when the shop cannot be read now."""
    served = shop().policies()
    if served is None:
        return None
    return save_all((from_shop(policy) for policy in served), changed_by)


def save_all(items: Iterable[Source | Refused], changed_by: str = CHANGED_BY) -> ImportReport:
    report = ImportReport()
    seen: set[str] = set()
    for item in items:
        if isinstance(item, Refused):
            report.refused.append(item)
        elif item.doc_id in seen:  # two sources claiming one doc_id would overwrite each other silently
            report.refused.append(Refused(item.source, "duplicate_doc_id",
                                          f"another source of this import already has the doc_id {item.doc_id}"))
        else:
            seen.add(item.doc_id)
            outcome = save_policy(item, changed_by)
            if isinstance(outcome, Refused):
                report.refused.append(outcome)
            else:
                getattr(report, outcome).append(item.doc_id)
    return report


def save_policy(item: Source, changed_by: str = CHANGED_BY, *, note: str = "",
                based_on: int | None = None) -> str | Refused:
    """"added", "updated" or "unchanged" — or why it was refused. All of one document or nothing.

    `based_on`: the version an editor started from (0 for a new document); the save is refused when the
    document has another version by then, so an edit never silently replaces one made meanwhile. An import
    passes None: the file or page is what the policy says."""
    seller = None
    if item.seller_code:
        seller = Seller.objects.filter(code=item.seller_code).first()
        if seller is None:
            return Refused(item.source, "unknown_seller", f"no seller has the code {item.seller_code!r}")
    with transaction.atomic():
        doc = PolicyDocument.objects.select_for_update().filter(doc_id=item.doc_id).first()
        if based_on is not None and (doc.version if doc else 0) != based_on:  # checked under the row's lock
            return _stale(item, doc, based_on)
        if based_on is None and doc is not None and _from_web(item) and doc.source != item.source:
            # A page names its doc_id itself (policy:doc_id): it may not take over the shop's returns policy
            # because it says it is that policy. Only the page that brought a document updates it.
            return Refused(item.source, "doc_id_taken", f"the policy {item.doc_id} came from another source; "
                                                        "a page may only update its own")
        if doc is None:
            doc = PolicyDocument.objects.create(doc_id=item.doc_id, title=item.title, body=item.body,
                                                seller=seller, source=item.source, version=1)
            outcome = "added"
        elif (doc.title, doc.body, doc.seller_id) == (item.title, item.body, seller.pk if seller else None):
            if doc.source != item.source:  # the same words found elsewhere: no new version
                PolicyDocument.objects.filter(pk=doc.pk).update(source=item.source)
            return "unchanged"
        else:
            if not doc.versions.exists():  # seeded or edited before imports kept history: keep what it said
                _keep(doc, changed_by="before versions")
            doc.title, doc.body, doc.seller, doc.source = item.title, item.body, seller, item.source
            doc.version += 1
            doc.save()
            outcome = "updated"
        _keep(doc, changed_by, note)
    return outcome


def _from_web(item: Source) -> bool:
    return item.source.lower().startswith(("http://", "https://"))


def _stale(item: Source, doc: PolicyDocument | None, based_on: int) -> Refused:
    if doc is None:
        return Refused(item.source, "not_found", f"there is no policy {item.doc_id} any more")
    if based_on == 0:
        return Refused(item.source, "duplicate_doc_id", f"a policy with the doc_id {item.doc_id} exists already")
    return Refused(item.source, "stale_version",
                   f"version {doc.version} of {item.doc_id} was saved after version {based_on}, the one edited")


def _keep(doc: PolicyDocument, changed_by: str, note: str = "") -> None:
    PolicyVersion.objects.create(doc=doc, version=doc.version, title=doc.title, body=doc.body,
                                 seller_code=doc.seller.code if doc.seller else "", source=doc.source,
                                 changed_by=changed_by, note=note)
