"""The database models: the Sundry shop (shop.py) and the support desk (desk.py)."""

from .desk import Approval, Conversation, Message, Run, Step, ToolCall
from .shop import (
    Charge, Customer, Order, OrderItem, Parcel, PolicyDocument, Refund, Scan, Seller, SellerMessage, money_field,
)
from .staff import Note, SavedReply, StaffAction
from .followup import FollowUp, ReplyEmailOptOut
from .ratings import Rating
from .attachments import Attachment  # noqa: F401  (a customer's photos and PDFs)

__all__ = [
    "Approval", "Conversation", "Message", "Run", "Step", "ToolCall",
    "Charge", "Customer", "Order", "OrderItem", "Parcel", "PolicyDocument", "Refund", "Scan", "Seller",
    "SellerMessage", "money_field",
    "Note", "SavedReply", "StaffAction",
    "FollowUp", "ReplyEmailOptOut",
    "Rating",
]
