from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("console/", include("support.web.console_urls")),
    path("api/", include("support.web.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("c/", include("support.web.link_urls")),  # e-mailed conversation links and unsubscribing
    path("slack/", include("support.web.slack_urls")),  # Slack's buttons on approval messages
    path("email/", include("support.web.inbound_urls")),  # customers' mail, posted by an e-mail provider
    path("", include("support.web.shop_urls")),
]
