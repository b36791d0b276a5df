"""The demo shop page: what a real shop would serve, with the one script tag that embeds the widget."""

from django.http import HttpResponse


def index(request):
    return HttpResponse("Sundry")
