"""The morning digest's switch on the Reports page: a lead turns their own digest on or off (POST, CSRF-checked);
anyone else is refused (403). The digest itself is support/reports/digest.py."""

from __future__ import annotations

from django.http import HttpResponseForbidden
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from support.reports import digest
from support.web.views.console import staff_member_required


@require_POST
@staff_member_required
def toggle(request):
    if not digest.digest_opt_in(user=request.user, on=request.POST.get("digest") == "on"):
        return HttpResponseForbidden("Only a support lead may have the morning digest.")
    return redirect("console:reports")
