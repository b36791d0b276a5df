"""The staff console's pages (the data comes from the staff API and the staff socket)."""

from django.urls import path

from support.web.views import (
    agent,
    agent_test,
    audit,
    console,
    decide,
    desk_settings,
    evaluation,
    join,
    policies,
    report_digest,
    reports,
    setup,
    team,
)

app_name = "console"

urlpatterns = [
    path("", console.index, name="index"),
    path("conversations/<uuid:public_id>/", console.conversation, name="conversation"),
    path("approvals/", console.approvals, name="approvals"),
    # The page an e-mailed approval link opens (support/web/views/decide.py): GET shows, POST decides.
    path("decide/<str:token>/", decide.decide, name="decide"),
    path("team/", team.page, name="team"),
    # Managing the team (support.manage_team): invite, resend, cancel, role, team, deactivate, reactivate.
    path("team/<str:action>/", team.change, name="team_change"),
    # The page a staff invitation's link opens (support/web/views/join.py): GET shows, POST makes the account.
    path("join/<str:token>/", join.join, name="join"),
    path("settings/", desk_settings.page, name="settings"),
    path("audit/", audit.page, name="audit"),
    path("audit/export.<str:fmt>", audit.export, name="audit_export"),
    # Reports (support/web/views/reports.py, docs/reports.md): the page, each count's rows, the page as CSV.
    path("reports/", reports.page, name="reports"),
    path("reports/export.csv", reports.export_csv, name="reports_export"),
    path("reports/digest/", report_digest.toggle, name="reports_digest"),  # a lead's morning digest on/off
    path("reports/<slug:figure>/", reports.drill, name="report_drill"),
    path("evaluation/", evaluation.summary, name="evaluation"),
    path("evaluation/report.html", evaluation.full_report, name="evaluation_report"),
    # The agent profile (support/web/views/agent.py) and the first hour with a real shop (setup.py).
    path("agent/", agent.editor, name="agent"),
    path("agent/publish/", agent.publish, name="agent_publish"),
    path("agent/versions/<int:number>/rollback/", agent.rollback, name="agent_rollback"),
    path("setup/", setup.checklist, name="setup"),
    path("setup/policies/", setup.policies, name="setup_policies"),
    # "Test this draft" (support/web/views/agent_test.py): staff read, support.change_agent_profile starts one.
    path("agent/test/", agent_test.page, name="agent_test"),
    path("agent/test/<uuid:public_id>/", agent_test.detail, name="agent_test_detail"),
    path("agent/test/<uuid:public_id>/<str:side>.html", agent_test.report, name="agent_test_report"),
    path("policies/", policies.policy_list, name="policies"),
    # "+new": no policy's doc_id has a "+", so a policy may be called NEW and still be reached.
    path("policies/+new/", policies.policy_new, name="policy_new"),
    path("policies/<str:doc_id>/", policies.policy_detail, name="policy"),
    path("policies/<str:doc_id>/edit/", policies.policy_edit, name="policy_edit"),
    path("policies/<str:doc_id>/versions/<int:version>/", policies.policy_version, name="policy_version"),
]
