"""The desk's switches as a lead reads them (/console/settings/): grouped, each with whether it is on, what it does
in one sentence, its current value and who may change it. Read from django.conf.settings (docs/deploy.md lists
every one); a secret is shown only as "set" or "not set", never its value. Nothing here changes a setting."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings

OPERATOR = "the operator (environment variable)"
PROFILE = "the operator sets the cap; a lead may set a stricter value in the agent profile"


@dataclass(frozen=True)
class Setting:
    name: str
    does: str
    secret: bool = False
    in_profile: bool = False  # the agent profile's limit: this is its cap (support/profiles/caps.py)


@dataclass(frozen=True)
class Group:
    key: str
    title: str
    switches: tuple  # the settings that must all be set (a number above 0) for the group to be on; (): always on
    settings: tuple


def _is_set(value) -> bool:
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return value > 0
    return bool(value)


GROUPS = (
    Group("four_eyes", "Four eyes", ("SECOND_APPROVAL_ABOVE",), (
        Setting("SECOND_APPROVAL_ABOVE", "A refund above this amount needs two different people to approve it "
                "(0: off).", in_profile=True),
        Setting("PROFILE_PUBLISH_NEEDS_TWO", "Publishing an agent profile draft needs a second person to confirm it."),
        Setting("LARGE_REFUND_THRESHOLD", "Approving a refund above this amount needs a support lead."),
    )),
    Group("deadlines", "Approval deadlines and nudges", (), (
        Setting("APPROVAL_TIMEOUT_SECONDS", "Seconds before an undecided approval expires."),
        Setting("APPROVAL_REMIND_AT", "Past this share of an approval's time, the people who may decide it are "
                "reminded once."),
        Setting("APPROVAL_ESCALATE_AT", "Past this share of an approval's time, the support leads are told once."),
        Setting("APPROVAL_EMAILS", "Each approval request is e-mailed to the staff who opted in."),
        Setting("APPROVAL_LINK_MAX_AGE", "Seconds an e-mailed approval link works (once)."),
    )),
    Group("inbound", "Inbound e-mail", ("INBOUND_EMAIL_ADDRESS",), (
        Setting("INBOUND_EMAIL_ADDRESS", "The address customers write to; empty: no mail is read."),
        Setting("INBOUND_IMAP_HOST", "A mailbox the desk reads over IMAP; empty: none."),
        Setting("INBOUND_IMAP_USER", "The mailbox's account."),
        Setting("INBOUND_IMAP_PASSWORD", "The mailbox's password.", secret=True),
        Setting("INBOUND_WEBHOOK_SECRET", "The providers' webhooks' login; not set: webhooks are off.", secret=True),
        Setting("INBOUND_MAILGUN_SIGNING_KEY", "Mailgun's signing key; not set: Mailgun is off.", secret=True),
        Setting("INBOUND_EMAILS_PER_SENDER_PER_HOUR", "Mail from one address past this an hour is kept, not answered."),
    )),
    Group("slack", "Slack", ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APPROVALS_CHANNEL"), (
        Setting("SLACK_BOT_TOKEN", "The Slack app's token; approval requests are posted to Slack when it, the "
                "signing secret and the channel are set.", secret=True),
        Setting("SLACK_SIGNING_SECRET", "Proves that button presses come from Slack.", secret=True),
        Setting("SLACK_APPROVALS_CHANNEL", "The channel approval requests are posted to."),
    )),
    Group("copilot", "Copilot", ("COPILOT_ENABLED",), (
        Setting("COPILOT_ENABLED", "Staff may ask the copilot for a draft, a summary, a suggested step or an answer."),
        Setting("COPILOT_PER_PERSON_PER_HOUR", "Copilot runs one person may ask for an hour."),
        Setting("COPILOT_MAX_STEPS", "Model calls one copilot run may make."),
        Setting("COPILOT_MAX_COST_USD", "The most one copilot run may cost, in USD (0: no cap)."),
    )),
    Group("routing", "Routing", (), (
        Setting("STAFF_PRESENCE_SECONDS", "Hand-overs and approval requests go to an online person with the fewest "
                "open conversations; a person counts as online this many seconds after their console last said so."),
        Setting("ESCALATION_NEEDS_APPROVAL", "The agent's hand-over to a person waits for a staff approval first."),
    )),
    Group("limits", "Rate limits", (), (
        Setting("MESSAGES_PER_MINUTE", "Messages one conversation may send a minute."),
        Setting("CUSTOMER_MESSAGES_PER_MINUTE", "Messages one customer may send a minute."),
        Setting("CUSTOMER_CONVERSATIONS_PER_HOUR", "New conversations one customer may start an hour."),
        Setting("STAFF_INVITATIONS_PER_HOUR", "Staff invitations one person may send an hour."),
        Setting("REFUND_CEILING", "The most one refund may be.", in_profile=True),
        Setting("AUTO_APPROVE_REFUNDS_UP_TO", "Refunds up to this need no person (0: every refund waits).",
                in_profile=True),
        Setting("AGENT_MAX_STEPS", "Model calls in one run of the agent.", in_profile=True),
        Setting("CONVERSATION_MAX_COST_USD_PER_DAY", "What one conversation may cost in model calls a day (USD).",
                in_profile=True),
    )),
    Group("shop", "The shop backend", (), (
        Setting("SHOP_BACKEND", "Where orders, parcels and refunds live: demo, http or shopify."),
        Setting("SHOP_URL", "The shop's API, for the http backend."),
        Setting("SHOP_API_KEY", "The shop API's key.", secret=True),
        Setting("SHOPIFY_SHOP_DOMAIN", "The Shopify store, for the shopify backend."),
        Setting("SHOPIFY_ACCESS_TOKEN", "The Shopify store's access token.", secret=True),
    )),
    Group("model", "The model", (), (
        Setting("MODEL_BASE_URL", "The model's address; empty: the built-in stand-in."),
        Setting("MODEL_NAME", "The model that answers customers."),
        Setting("MODEL_API_KEY", "The model endpoint's key.", secret=True),
        Setting("MODEL_ACCEPTS_IMAGES", "Customers' photos are sent to the model as images."),
    )),
)


def _shown(setting: Setting) -> str:
    value = getattr(settings, setting.name, None)
    if setting.secret:
        return "set" if value else "not set"
    if isinstance(value, bool):
        return "on" if value else "off"
    return "empty" if value in (None, "") else str(value)


def desk_settings() -> list[dict]:
    """Each group: its title, whether it is on, and its settings as shown (name, value, what, who, profile)."""
    found = []
    for group in GROUPS:
        on = all(_is_set(getattr(settings, name, None)) for name in group.switches)
        rows = [{"name": s.name, "value": _shown(s), "does": s.does, "secret": s.secret, "in_profile": s.in_profile,
                 "who": PROFILE if s.in_profile else OPERATOR} for s in group.settings]
        found.append({"key": group.key, "title": group.title, "on": on, "always": not group.switches, "rows": rows})
    return found
