"""The customer's rating and language (bearer conversation token, as the rest of the customer API), a staff
member typing (staff session + CSRF), and the rating as staff read it. The rules are support/desk/feedback.py's.
"""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from support.desk import feedback

from .common import ApiError, api, json_body
from .customer import _conversation as customers_conversation
from .desk import _conversation as staff_conversation
from .staff import staff_required

NOT_RATABLE = "You can rate this conversation once your question is answered or the conversation is closed."


@csrf_exempt
@api("GET", "POST")
def rating(request, public_id):
    """GET: whether a rating is offered now (`offered`, `occasion`) and the one given. POST {"score": 1-5,
    "comment"?}: save it, or change it (200; 201 the first time); 409 when there is nothing to rate yet."""
    conversation = customers_conversation(request, public_id)
    if request.method == "GET":
        occasion = feedback.rating_occasion(conversation)
        given = feedback.rating_of(conversation)
        return JsonResponse({"offered": occasion is not None, "occasion": occasion,
                             "rating": feedback.rating_json(given)})
    body = json_body(request)
    try:
        saved, created = feedback.rating_save(conversation=conversation, score=body.get("score"),
                                              comment=body.get("comment"))
    except feedback.InvalidFeedback as error:
        raise ApiError(400, str(error)) from None
    except feedback.NotRatable:
        raise ApiError(409, NOT_RATABLE) from None
    return JsonResponse({"rating": feedback.rating_json(saved)}, status=201 if created else 200)


@csrf_exempt
@api("POST")
def language(request, public_id):
    """{"language": "de"}: the customer's language, for the desk's fixed texts and the model."""
    conversation = customers_conversation(request, public_id)
    try:
        code = feedback.language_set(conversation=conversation, language=json_body(request).get("language"))
    except feedback.InvalidFeedback as error:
        raise ApiError(400, str(error)) from None
    return JsonResponse({"language": code})


@api("POST")
@staff_required
def typing(request, public_id):
    """The staff member is writing a reply: the customer sees "<name> is typing…" for a few seconds."""
    conversation = staff_conversation(public_id)
    feedback.typing_publish(conversation=conversation, user=request.user)
    return JsonResponse({"sent": True}, status=202)


@api("GET")
@staff_required
def staff_rating(request, public_id):
    conversation = staff_conversation(public_id)
    return JsonResponse({"rating": feedback.rating_json(feedback.rating_of(conversation))})
