"""The database models: the Sundry shop (shop.py), the support desk (desk.py) and the agent profile's versions
(profiles.py)."""

from .attachments import Attachment  # noqa: F401  (a customer's photos and PDFs)
from .copilot import CopilotRun
from .desk import Approval, Conversation, Message, Run, Step, ToolCall
from .effects import ShopEffect
from .followup import FollowUp, ReplyEmailOptOut
from .inbound import InboundEmail, OutboundEmail, UndeliverableAddress
from .profiles import LiveProfile, ProfileRelease, ProfileVersion
from .ratings import Rating
from .reports import DigestOptIn, DigestSent, ProvisionalReportDay, ReportDay
from .shop import (
    Charge,
    Customer,
    Order,
    OrderItem,
    Parcel,
    PolicyDocument,
    PolicyVersion,
    Refund,
    Scan,
    Seller,
    SellerMessage,
    money_field,
)
from .staff import Note, SavedReply, StaffAction, Team
from .staff_alerts import ApprovalEmailOptIn, DecisionLink, SlackAccount, SlackApprovalMessage
from .team import StaffInvitation, TeamChange
from .trials import DraftTest

__all__ = [
    "Approval", "Conversation", "Message", "Run", "Step", "ToolCall", "ShopEffect",
    "Charge", "Customer", "Order", "OrderItem", "Parcel", "PolicyDocument", "PolicyVersion", "Refund", "Scan",
    "Seller", "SellerMessage", "money_field",
    "Note", "SavedReply", "StaffAction", "Team", "StaffInvitation", "TeamChange",
    "ApprovalEmailOptIn", "DecisionLink", "SlackAccount", "SlackApprovalMessage",
    "FollowUp", "ReplyEmailOptOut",
    "InboundEmail", "OutboundEmail", "UndeliverableAddress",
    "Rating",
    "ReportDay", "ProvisionalReportDay", "DigestOptIn", "DigestSent",
    "LiveProfile", "ProfileRelease", "ProfileVersion",
    "DraftTest",
    "CopilotRun",
]
