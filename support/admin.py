"""The Django admin: the shop, read-mostly (orders, parcels, refunds and seller messages are records;
staff edit customers, sellers and policy texts).

Who sees what is Django's model permissions, granted to the staff groups (support/desk/permissions.py GROUPS,
migration 0008): Support agents view every shop and desk record; Support leads may also edit customers,
sellers and policy texts. Everything else is read-only for everyone, superusers included: a refund is money
already moved, an approval a decision on record, a transcript what was said; the console's actions follow
the desk's rules, editing the rows would not.
"""

from django.contrib import admin
from django.contrib.auth import get_user_model

from support.desk.policy_import import save_policy
from support.desk.policy_sources import Source
from support.models import (
    Approval,
    ApprovalEmailOptIn,
    Charge,
    Conversation,
    Customer,
    InboundEmail,
    Message,
    Order,
    OrderItem,
    Parcel,
    PolicyDocument,
    Refund,
    Run,
    Scan,
    Seller,
    SellerMessage,
    SlackAccount,
    Step,
    Team,
    ToolCall,
)
from support.models.desk import InboxEvent

admin.site.site_header = admin.site.site_title = "Sundry support desk: records"
admin.site.index_title = "Shop and desk records"


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    """A record of what happened: shown, never edited by hand (refunds are money already moved)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class OrderItemInline(ReadOnlyInline):
    model = OrderItem
    fields = ["sku", "title", "qty", "unit_price", "seller_description"]


class ChargeInline(ReadOnlyInline):
    model = Charge
    fields = ["kind", "amount"]


class ParcelInline(ReadOnlyInline):
    model = Parcel
    fields = ["tracking", "carrier", "status"]


class RefundInline(ReadOnlyInline):
    model = Refund
    fields = ["amount", "reason", "created_at", "tool_call_id"]


class ScanInline(ReadOnlyInline):
    model = Scan
    fields = ["at", "event", "detail", "location"]
    show_change_link = False


@admin.register(Customer)
class CustomerAdmin(admin.ModelAdmin):
    list_display = ["name", "email", "public_id"]
    search_fields = ["name", "email"]
    readonly_fields = ["public_id"]


@admin.register(Seller)
class SellerAdmin(admin.ModelAdmin):
    list_display = ["code", "name", "is_sundry"]
    search_fields = ["code", "name"]


@admin.register(Order)
class OrderAdmin(ReadOnlyAdmin):
    list_display = ["number", "customer", "seller", "status", "placed_at", "total", "refunded"]
    list_filter = ["status", "seller"]
    search_fields = ["number", "customer__email", "customer__name", "items__title", "parcels__tracking"]
    list_select_related = ["customer", "seller"]
    inlines = [OrderItemInline, ChargeInline, ParcelInline, RefundInline]
    date_hierarchy = "placed_at"

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("items", "refunds")


@admin.register(Parcel)
class ParcelAdmin(ReadOnlyAdmin):
    list_display = ["tracking", "carrier", "status", "order"]
    list_filter = ["status", "carrier"]
    search_fields = ["tracking", "order__number"]
    list_select_related = ["order"]
    inlines = [ScanInline]


@admin.register(PolicyDocument)
class PolicyDocumentAdmin(admin.ModelAdmin):
    list_display = ["doc_id", "title", "seller", "version"]
    list_filter = ["seller"]
    search_fields = ["doc_id", "title", "body"]
    fields = ["doc_id", "title", "body", "seller", "version", "source"]

    def get_readonly_fields(self, request, obj=None):
        # The version counts the saved changes; a doc_id, once saved, is what the agent and the history cite.
        return ["version", "source", "doc_id"] if obj is not None else ["version", "source"]

    def save_model(self, request, obj, form, change):
        """An edit is versioned as an import is (docs/policies.md): a new version only when the words changed,
        the old one kept, and the staff member named."""
        save_policy(Source(obj.doc_id, obj.title, obj.body, obj.source or "admin",
                           obj.seller.code if obj.seller else ""), changed_by=f"admin: {request.user.get_username()}")
        saved = PolicyDocument.objects.get(doc_id=obj.doc_id)
        obj.pk, obj.version, obj.source = saved.pk, saved.version, saved.source


@admin.register(Refund)
class RefundAdmin(ReadOnlyAdmin):
    list_display = ["order", "amount", "reason", "created_at", "tool_call_id"]
    search_fields = ["order__number", "tool_call_id", "reason"]
    list_select_related = ["order"]
    date_hierarchy = "created_at"


@admin.register(SellerMessage)
class SellerMessageAdmin(ReadOnlyAdmin):
    list_display = ["order", "seller", "created_at", "tool_call_id"]
    search_fields = ["order__number", "seller__code", "body", "tool_call_id"]
    list_select_related = ["order", "seller"]


# --- The support desk: read-mostly; decisions are made in the console, not by editing rows. ------


class MessageInline(ReadOnlyInline):
    model = Message
    fields = ("seq", "role", "author", "content", "tool_call_id", "created_at")
    readonly_fields = fields
    show_change_link = False


class RunInline(ReadOnlyInline):
    model = Run
    fields = ("public_id", "status", "stop_reason", "outcome", "attempts", "turns", "cost_usd", "created_at")
    readonly_fields = fields


class InboxEventInline(ReadOnlyInline):
    model = InboxEvent
    fields = ("created_at", "kind", "actor", "assignee")
    readonly_fields = fields
    show_change_link = False


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    list_display = ("public_id", "customer", "status", "assignee", "closed_at", "last_seq", "updated_at")
    list_filter = ("status",)
    search_fields = ("public_id", "customer__email", "customer__name")
    list_select_related = ("customer", "assignee")
    inlines = [RunInline, MessageInline, InboxEventInline]


@admin.register(InboundEmail)
class InboundEmailAdmin(ReadOnlyAdmin):
    """Every customer's mail received and what became of it (auto-replies, bounces and refusals included); the
    raw mail is opened from the console's "Show original", not here."""

    list_display = ("received_at", "sender", "subject", "source", "outcome", "conversation")
    list_filter = ("outcome", "source")
    search_fields = ("sender", "subject", "mail_id")
    list_select_related = ("conversation",)
    exclude = ("raw",)


@admin.register(InboxEvent)
class InboxEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "conversation", "kind", "actor", "assignee")
    list_filter = ("kind",)
    list_select_related = ("conversation", "actor", "assignee")


class StepInline(ReadOnlyInline):
    model = Step
    fields = ("turn", "kind", "tool", "arguments", "result", "error", "duration_ms", "prompt_tokens",
              "completion_tokens", "cost_usd", "finish_reason")
    readonly_fields = fields
    show_change_link = False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ("public_id", "conversation", "status", "stop_reason", "outcome", "attempts", "turns",
                    "cost_usd", "heartbeat_at", "created_at")
    list_filter = ("status", "stop_reason", "outcome")
    search_fields = ("public_id", "conversation__public_id")
    inlines = [StepInline]


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = ("call_id", "name", "status", "attempts", "idempotency_key", "created_at")
    list_filter = ("name", "status")
    search_fields = ("call_id", "idempotency_key")


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = ("public_id", "tool_call", "decision", "decided_by", "decided_via", "requested_at", "decided_at")
    list_filter = ("decision", "decided_via")


# -- deciding away from the console (docs/console.md#deciding-from-an-e-mail-or-from-slack) ----------------------
# Who is e-mailed approval requests and who a Slack user is: set by whoever manages staff accounts (superusers;
# no staff group has these permissions).

@admin.register(ApprovalEmailOptIn)
class ApprovalEmailOptInAdmin(admin.ModelAdmin):
    list_display = ("user", "created_at")
    autocomplete_fields = ("user",)


@admin.register(SlackAccount)
class SlackAccountAdmin(admin.ModelAdmin):
    list_display = ("slack_user_id", "user")
    search_fields = ("slack_user_id", "user__username", "user__email")
    autocomplete_fields = ("user",)


# -- routing (docs/console.md#routing): teams, set by whoever manages staff accounts (superusers; no staff group
# has these permissions). With no team, everyone who may do the work is one team.

@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("name", "takes_handovers", "takes_approvals", "member_count")
    filter_horizontal = ("members",)

    @admin.display(description="members")
    def member_count(self, team: Team) -> int:
        return team.members.count()

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "members":  # only staff accounts can take conversations or decide approvals
            kwargs["queryset"] = get_user_model().objects.filter(is_staff=True).order_by("username")
        return super().formfield_for_manytomany(db_field, request, **kwargs)
