"""The setup checklist (/console/setup/): what a desk on a remote shop still needs before it goes live, each
step with its state (support/profiles/setup.py decides them) and the way to do it. "Check again" runs the
shop's checks with a test customer's e-mail and order; the last results are kept in the person's session.
"""

from __future__ import annotations

from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods, require_POST

from support.desk import permissions
from support.desk.policy_import import ImportReport, import_shop_policies
from support.profiles import selectors as profile_selectors
from support.profiles import setup
from support.shop import port
from support.shop.conformance import Check
from support.web.views.console import console_page, staff_member_required

KEPT = "setup_shop_checks"  # the session key: the last checks and whom they were run with
IMPORTED = "setup_policy_import"  # the session key: what the last import of the shop's policies did


@require_http_methods(["GET", "POST"])
@staff_member_required
def checklist(request):
    kept = request.session.get(KEPT) or {}
    if request.method == "POST":
        refusal = permissions.profile_change_refusal(request.user)
        if refusal is not None:
            permissions.log_refusal(request.user, permissions.request_address(request),
                                    f"{request.method} {request.path}: {refusal}")
            return _page(request, kept, problem=refusal, email="", order="", status=403)
        email, order = request.POST.get("email", "").strip()[:254], request.POST.get("order", "").strip()[:64]
        if not email or not order:
            return _page(request, kept, problem="Give a test customer's e-mail and one of their order numbers.",
                         email=email, order=order, status=400)
        checks = setup.shop_checks(email=email, order_number=order)
        request.session[KEPT] = {"email": email, "order": order, "checks": [c.as_dict() for c in checks]}
        return redirect("console:setup")
    return _page(request, kept, email=kept.get("email", ""), order=kept.get("order", ""))


@require_POST
@staff_member_required
def policies(request):
    """Import the shop's policies from where the shop serves them. The form has no field: no address or path
    anyone types is ever read (support/desk/policy_import.py, import_shop_policies)."""
    refusal = permissions.policy_edit_refusal(request.user)
    if refusal is not None:
        permissions.log_refusal(request.user, permissions.request_address(request),
                                f"{request.method} {request.path}: {refusal}")
        kept = request.session.get(KEPT) or {}
        return _page(request, kept, problem=refusal, email=kept.get("email", ""), order=kept.get("order", ""),
                     status=403)
    try:
        report = import_shop_policies(f"shop import by {request.user.get_username()}")
        request.session[IMPORTED] = _import_words(report)
    except port.ShopUnavailable as e:
        request.session[IMPORTED] = {"ok": False, "text": f"The shop could not be reached or answered something "
                                                          f"the desk could not read ({e}). Try again later."}
    return redirect("console:setup")


def _import_words(report: ImportReport | None) -> dict:
    if report is None:
        return {"ok": False, "text": "This shop serves no policies the desk can read: a contract shop serves them "
                                     "at GET /policies, a Shopify store as its shop policies (the demo shop's are "
                                     "the desk's own). Write them, or import files or pages, as below."}
    return {"ok": not report.refused, "text": f"The shop's policies: {report.summary()}.",
            "refused": [f"{r.source}: {r.why}" for r in report.refused]}


def _page(request, kept: dict, *, problem: str = "", email: str, order: str, status: int = 200):
    checks = [Check(**c) for c in kept.get("checks", [])] or None
    draft = profile_selectors.draft()
    return console_page(request, "setup.html", "setup", status=status, steps=setup.steps(checks=checks),
                        checks=checks or [], problem=problem, email=email, order=order,
                        live=profile_selectors.gone_live(), needed=setup.needed(), draft=draft,
                        can_publish=request.user.has_perm(permissions.CHANGE_AGENT_PROFILE),
                        can_import=request.user.has_perm(permissions.EDIT_POLICIES),
                        imported=request.session.get(IMPORTED))
