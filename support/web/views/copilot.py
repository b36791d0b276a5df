"""The copilot's staff API (docs/copilot.md): ask for a draft, a summary, a suggestion or an answer, and read a
conversation's runs. Staff session + CSRF (staff_required, which logs every 403); the rules live in
support/copilot/services.py."""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse

from support import copilot

from .common import ApiError, api, json_body
from .staff import _conversation, staff_required


def refused(error: copilot.CopilotRefused):
    headers = {"Retry-After": str(error.retry_after)} if error.retry_after else None
    raise ApiError(error.status, str(error), headers) from None


@api("GET", "POST")
@staff_required
def runs(request, public_id):
    conversation = _conversation(public_id)
    if request.method == "GET":
        if not settings.COPILOT_ENABLED:  # the console then shows none of it (console-copilot.js)
            raise ApiError(403, "The copilot is turned off on this desk (COPILOT_ENABLED).")
        return JsonResponse(copilot.copilot_view(conversation=conversation, user=request.user))
    body = json_body(request)
    try:
        run = copilot.copilot_start(conversation=conversation, user=request.user, kind=body.get("kind"),
                                    question=body.get("question", ""))
    except copilot.CopilotRefused as error:
        refused(error)
    return JsonResponse({"copilot": copilot.run_json(run, last_seq=conversation.last_seq)}, status=202)
