"""What the widget reads when it starts: the shop's face (names, languages, look, hours) from the live agent
profile. Public, like the widget's script: it names the shop and nothing about any customer."""

from __future__ import annotations

from django.http import JsonResponse

from support.customers import faces

from .common import api


@api("GET")
def widget_face(request):
    response = JsonResponse(faces.widget_face())
    response["Cache-Control"] = "no-cache"  # a change the lead publishes shows at the widget's next start
    return response
