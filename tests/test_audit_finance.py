"""The audit for finance: the order, the amount (as it ran, and as asked), its currency, the decision and the
reason as columns of their own in the console's Audit page and the CSV export, and as fields of each row in the
JSON export, besides the columns that were there (the arguments as JSON stay).

Who: Sam is a support lead (he may export).
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.test import Client

from support.desk import audit, gate, staff_actions
from tests.desk_factories import (
    REFUND_ARGUMENTS,
    make_user,
    pending_refund_approval,
    queued,  # noqa: F401  (fixture)
    start_conversation,
)

FINANCE = ("order", "amount", "amount_asked", "currency", "decision", "reason")


@pytest.fixture
def sam(db):
    return make_user("sam", staff=True, group="leads", first_name="Sam")


@pytest.fixture
def history(demo, sam, queued):
    """Sam approved 30.00 of 40.00 asked on SU-41310, rejected 10.00 on it, and refunded 20.00 on SU-41207."""
    edited = pending_refund_approval(start_conversation(demo.maya), {**REFUND_ARGUMENTS, "amount": "40.00"})
    gate.approval_decide(approval=edited, user=sam, approve=True, reason="One of two sets arrived",
                         arguments={**REFUND_ARGUMENTS, "amount": "30.00"})
    rejected = pending_refund_approval(start_conversation(demo.tom), {**REFUND_ARGUMENTS, "amount": "10.00"})
    gate.approval_decide(approval=rejected, user=sam, approve=False, reason="Refunded by the bank")
    staff_actions.refund_issue(conversation=start_conversation(demo.maya), user=sam, order_id="SU-41207",
                               amount="20.00", reason="goodwill")


def export(user, fmt: str):
    client = Client()
    client.force_login(user)
    response = client.get(f"/console/audit/export.{fmt}")
    assert response.status_code == 200
    return b"".join(response.streaming_content).decode()


def finance(row: dict) -> tuple:
    return tuple(row[field] for field in FINANCE)


EXPECTED = [
    ("SU-41310", "30.00", "40.00", "EUR", "edited", "One of two sets arrived"),
    ("SU-41310", "10.00", "10.00", "EUR", "rejected", "Refunded by the bank"),
    ("SU-41207", "20.00", "20.00", "EUR", "done", "goodwill"),
]


def test_the_csv_has_order_amount_currency_decision_and_reason_as_columns(history, sam):
    rows = list(csv.DictReader(io.StringIO(export(sam, "csv"))))
    assert [finance(r) for r in rows] == EXPECTED
    assert set(audit.FIELDS) >= {"requested_arguments", "executed_arguments", "changed", "result", "via"}  # kept


def test_the_json_rows_carry_them_as_fields(history, sam):
    rows = json.loads(export(sam, "json"))["rows"]
    assert [finance(r) for r in rows] == EXPECTED
    assert rows[0]["requested_arguments"]["amount"] == "40.00"  # the arguments as they were, still there


def test_the_audit_page_shows_them_in_columns_of_their_own(history, sam):
    client = Client()
    client.force_login(sam)
    html = client.get("/console/audit/").content.decode()
    for header in ("<th>Order</th>", "<th>Amount</th>", "<th>Decision</th>", "<th>Why</th>", "<th>Asked</th>"):
        assert header in html
    assert 'data-label="Amount" class="is-money">30.00 EUR<span class="sub">asked 40.00</span>' in html
    assert 'data-label="Order" class="is-money">SU-41207<' in html and 'data-label="Decision">edited<' in html


def test_a_row_without_money_leaves_the_columns_empty(demo, sam, queued):
    handover = pending_refund_approval(start_conversation(demo.maya), {"reason": "angry", "summary": "wants a call"})
    gate.approval_decide(approval=handover, user=sam, approve=False, reason="no")
    [row] = list(csv.DictReader(io.StringIO(export(sam, "csv"))))
    assert finance(row) == ("", "", "", "", "rejected", "no")
