"""The shop's tool list: six tools in working order, each with a valid, strict JSON schema, a description
for the model and the contract's label and gating; escalate_to_human answers and writes nothing.
"""

from __future__ import annotations

import jsonschema
import pytest

from support.models import Refund, SellerMessage
from support.tools import SHOP_TOOLS, tool_by_name
from support.tools.escalation import escalate_to_human

CONTRACT = {
    # name: (label, gated, terminal)
    "get_order": ("Looking up your order", False, False),
    "track_parcel": ("Checking the carrier's tracking", False, False),
    "search_policy": ("Reading our policies", False, False),
    "message_seller": ("Contacting the seller", False, False),
    "issue_refund": ("Preparing a refund", True, False),
    # Not gated: it waits for a person only with ESCALATION_NEEDS_APPROVAL (tests/test_handover.py).
    "escalate_to_human": ("Handing over to a specialist", False, True),
}

# name: (valid arguments, ill-typed variant)
VALID = {
    "get_order": ({"order_id": "SU-41207"}, {"order_id": 41207}),
    "track_parcel": ({"tracking": "HL40120771"}, {"tracking": ["HL40120771"]}),
    "search_policy": ({"query": "missing parcel", "seller_id": "S-HL"}, {"query": "missing", "seller_id": None}),
    "message_seller": ({"order_id": "SU-41207", "message": "Hi"}, {"order_id": "SU-41207", "message": 5}),
    "issue_refund": (
        {"order_id": "SU-1", "amount": "24.99", "reason": "r"},
        {"order_id": "SU-1", "amount": 24.99, "reason": "r"},
    ),
    "escalate_to_human": ({"reason": "r", "summary": "s"}, {"reason": "r", "summary": {"text": "s"}}),
}


def test_it_lists_the_six_shop_tools_in_working_order():
    assert [t.name for t in SHOP_TOOLS] == list(CONTRACT)


def test_it_finds_a_tool_by_name_and_none_for_an_unknown_one():
    assert tool_by_name("issue_refund") is SHOP_TOOLS[4]
    assert tool_by_name("delete_everything") is None


@pytest.mark.parametrize("tool", SHOP_TOOLS, ids=lambda t: t.name)
def test_it_declares_the_contract_label_and_gating(tool):
    assert (tool.label, tool.gated, tool.terminal) == CONTRACT[tool.name]
    assert len(tool.description) > 120
    assert tool.spec()["function"]["name"] == tool.name


@pytest.mark.parametrize("tool", SHOP_TOOLS, ids=lambda t: t.name)
def test_it_has_a_valid_strict_schema(tool):
    jsonschema.Draft202012Validator.check_schema(tool.parameters)
    assert tool.parameters["type"] == "object"
    assert tool.parameters["additionalProperties"] is False
    for prop in tool.parameters["properties"].values():
        assert prop["type"] == "string" and ("maxLength" in prop or "pattern" in prop)


@pytest.mark.parametrize("tool", SHOP_TOOLS, ids=lambda t: t.name)
def test_it_accepts_valid_and_rejects_missing_extra_and_ill_typed_arguments(tool):
    valid, ill_typed = VALID[tool.name]
    assert tool.validation_error(valid) is None
    required = tool.parameters["required"][0]
    missing = {k: v for k, v in valid.items() if k != required}
    assert required in tool.validation_error(missing)
    assert "surprise" in tool.validation_error({**valid, "surprise": 1})
    assert tool.validation_error(ill_typed) is not None
    assert tool.validation_error("not an object") is not None


@pytest.mark.parametrize("order_id", ["SU-", "41207", "SU-123456789", "su-41207", "SU-41207; DROP", "SU-٤١٢"])
def test_it_rejects_malformed_order_ids(order_id):
    assert tool_by_name("get_order").validation_error({"order_id": order_id}) is not None


@pytest.mark.parametrize("amount", ["24.999", "-1", "1e3", "24,99", "", "12345678"])
def test_it_rejects_malformed_amounts(amount):
    args = {"order_id": "SU-41290", "amount": amount, "reason": "r"}
    assert tool_by_name("issue_refund").validation_error(args) is not None


def test_it_escalates_and_records_nothing_in_the_shop(ctx_for):
    result = escalate_to_human(ctx_for("maya@example.com"), reason="over the ceiling", summary="SU-41533, 480.00")
    assert result == {"status": "escalated", "queue": "support"}
    assert not Refund.objects.filter(tool_call_id__isnull=False).exists()
    assert not SellerMessage.objects.exists()
