from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("console/", include("support.console_urls")),
    path("api/", include("support.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("c/", include("support.link_urls")),  # e-mailed conversation links and unsubscribing
    path("", include("support.shop_urls")),
]
