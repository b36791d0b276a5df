"""The desk's pages for customers who come back from an e-mail: a conversation's link, unsubscribing."""

from django.urls import path

from support.web.views import links

urlpatterns = [
    path("unsubscribe/<str:token>/", links.unsubscribe, name="reply-emails-unsubscribe"),
    path("<str:token>/", links.conversation_page, name="conversation-link"),
]
