"""The staff console's pages (the data comes from the staff API and the staff socket)."""

from django.urls import path

from support.views import console

app_name = "console"

urlpatterns = [
    path("", console.index, name="index"),
]
