"""The JSON API, mounted under api/. Ids in paths are public UUIDs, parsed by the views so that a
malformed one answers the same JSON 404 as an unknown one."""

from django.urls import path, re_path

from support.web.views import (
    attachments,
    common,
    copilot,
    customer,
    desk,
    feedback,
    inbox,
    links,
    profile,
    staff,
    team,
    widget,
)

app_name = "api"

urlpatterns = [
    path("widget", widget.widget_face, name="widget"),  # the shop's face, read by the widget when it starts
    path("conversations", customer.conversations, name="conversations"),
    # Conversations that outlive the tab (support/web/views/links.py): before the <public_id> routes.
    path("conversations/open", links.open_conversation, name="conversations-open"),
    path("conversations/history", links.history, name="conversations-history"),
    path("conversations/<str:public_id>", customer.conversation, name="conversation"),
    path("conversations/<str:public_id>/messages", customer.messages, name="messages"),
    # A customer's photos and PDFs (support/web/views/attachments.py), opened through signed, expiring links.
    path("conversations/<str:public_id>/attachments", attachments.conversation_attachments, name="attachments"),
    path("staff/attachments/<str:public_id>", attachments.staff_attachment, name="staff-attachment"),
    path("files/<str:token>", attachments.attachment_file, name="attachment-file"),
    # The customer's rating and language, a person typing (support/web/views/feedback.py).
    path("conversations/<str:public_id>/rating", feedback.rating, name="rating"),
    path("conversations/<str:public_id>/language", feedback.language, name="language"),
    path("staff/conversations/<str:public_id>/typing", feedback.typing, name="staff-typing"),
    path("staff/conversations/<str:public_id>/rating", feedback.staff_rating, name="staff-rating"),
    path("staff/approvals", staff.approvals, name="staff-approvals"),
    path("staff/approvals/bulk", staff.decide_many, name="staff-approvals-bulk"),
    path("staff/approvals/<str:public_id>/approve", staff.approve, name="staff-approve"),
    path("staff/approvals/<str:public_id>/reject", staff.reject, name="staff-reject"),
    path("staff/conversations", staff.conversations, name="staff-conversations"),
    path("staff/conversations/<str:public_id>", staff.conversation, name="staff-conversation"),
    path("staff/conversations/<str:public_id>/takeover", staff.take_over, name="staff-take-over"),
    path("staff/conversations/<str:public_id>/handback", staff.hand_back, name="staff-hand-back"),
    path("staff/conversations/<str:public_id>/messages", staff.reply, name="staff-reply"),
    path("staff/conversations/<str:public_id>/copilot", copilot.runs, name="staff-copilot"),
    # The inbox (support/web/views/inbox.py).
    path("staff/inbox", inbox.inbox, name="staff-inbox"),
    path("staff/inbox/counts", inbox.counts, name="staff-inbox-counts"),
    path("staff/colleagues", inbox.colleagues, name="staff-colleagues"),
    path("staff/team-queue", team.team_queue, name="staff-team-queue"),
    path("staff/conversations/<str:public_id>/take", inbox.take, name="staff-take"),
    path("staff/conversations/<str:public_id>/assign", inbox.assign, name="staff-assign"),
    path("staff/conversations/<str:public_id>/unassign", inbox.unassign, name="staff-unassign"),
    path("staff/conversations/<str:public_id>/close", inbox.close, name="staff-close"),
    path("staff/conversations/<str:public_id>/reopen", inbox.reopen, name="staff-reopen"),
    path("staff/conversations/<str:public_id>/read", inbox.read, name="staff-read"),
    path("staff/conversations/<str:public_id>/inbox-events", inbox.history, name="staff-inbox-events"),
    # Working a conversation (support/web/views/desk.py).
    path("staff/emails/<str:public_id>/original", staff.email_original, name="staff-email-original"),
    path("staff/conversations/<str:public_id>/context", desk.context, name="staff-context"),
    path("staff/conversations/<str:public_id>/handover", desk.handover, name="staff-handover"),
    path("staff/conversations/<str:public_id>/refunds", desk.refund, name="staff-refund"),
    path("staff/conversations/<str:public_id>/seller-messages", desk.seller_message, name="staff-seller-message"),
    path("staff/conversations/<str:public_id>/actions", desk.actions, name="staff-actions"),
    path("staff/conversations/<str:public_id>/notes", desk.notes, name="staff-notes"),
    path("staff/conversations/<str:public_id>/links/revoke", links.revoke_links, name="staff-revoke-links"),
    path("staff/saved-replies", desk.saved_replies, name="staff-saved-replies"),
    path("staff/saved-replies/<str:public_id>", desk.saved_reply, name="staff-saved-reply"),
    # The agent profile (support/web/views/profile.py): leads with support.change_agent_profile.
    path("staff/profile", profile.profile, name="staff-profile"),
    path("staff/profile/draft", profile.draft, name="staff-profile-draft"),
    path("staff/profile/publish", profile.publish, name="staff-profile-publish"),
    path("staff/profile/rollback/<int:number>", profile.rollback, name="staff-profile-rollback"),
    path("staff/profile/diff", profile.diff, name="staff-profile-diff"),
    re_path(r"", common.not_found),
]
