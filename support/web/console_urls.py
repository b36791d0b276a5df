"""The staff console's pages (the data comes from the staff API and the staff socket)."""

from django.urls import path

from support.web.views import audit, console, evaluation

app_name = "console"

urlpatterns = [
    path("", console.index, name="index"),
    path("conversations/<uuid:public_id>/", console.conversation, name="conversation"),
    path("approvals/", console.approvals, name="approvals"),
    path("audit/", audit.page, name="audit"),
    path("audit/export.<str:fmt>", audit.export, name="audit_export"),
    path("evaluation/", evaluation.summary, name="evaluation"),
    path("evaluation/report.html", evaluation.full_report, name="evaluation_report"),
]
