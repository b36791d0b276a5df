"""Slack's requests: the Interactivity Request URL of the desk's Slack app (support/web/views/slack.py)."""

from django.urls import path

from support.web.views import slack

urlpatterns = [
    path("interactive/", slack.interactive, name="slack-interactive"),
]
