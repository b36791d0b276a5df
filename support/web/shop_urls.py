"""The demo shop's pages (Sundry's storefront, which embeds the support widget)."""

from django.urls import path

from support.web.views import shop

urlpatterns = [
    path("", shop.index, name="shop"),
]
