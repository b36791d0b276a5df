"""The admin for the staff groups, and the console's answer to an unknown conversation.

Who may see what: a Support agent and a Support lead (the demo login is a lead) may open /admin/ and view
every shop and desk record; a lead may also edit customers, sellers and policy texts. Refunds, approvals and
transcripts are read-only for everyone. Staff without a group see nothing there; non-staff cannot log in.
"""

from __future__ import annotations

import pytest
from django.test import Client

from support.desk import demo as demo_data
from support.models import Approval, Customer, Refund
from tests.desk_factories import (
    make_user,
    pending_refund_approval,
    queued,  # noqa: F401  (fixture)
    start_conversation,
)


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def lead(demo):
    return demo_data.demo_staff_user(password="pw")  # the demo login: a Support lead


@pytest.fixture
def agent(demo):
    return make_user("alex", staff=True, group="agents")


def test_the_demo_staff_user_sees_the_shop_and_desk_in_the_admin(lead):
    page = client_for(lead).get("/admin/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "have permission to view or edit anything" not in text
    for section in ("Orders", "Parcels", "Refunds", "Customers", "Conversations", "Approvals", "Runs",
                    "Policy documents", "Seller messages"):
        assert section in text, section


@pytest.mark.parametrize("model", ["order", "parcel", "refund", "customer", "seller", "policydocument",
                                   "sellermessage", "conversation", "run", "toolcall", "approval", "inboxevent"])
def test_agents_and_leads_can_open_every_list(agent, lead, model):
    for user in (agent, lead):
        assert client_for(user).get(f"/admin/support/{model}/").status_code == 200, (user, model)


def test_an_order_page_shows_its_items_parcels_and_refunds(agent, demo):
    order = demo.orders["SU-41310"]
    page = client_for(agent).get(f"/admin/support/order/{order.pk}/change/")
    assert page.status_code == 200
    assert order.items.first().title in page.content.decode()


def test_refunds_and_approvals_stay_read_only_even_for_leads(lead, demo, queued):
    approval = pending_refund_approval(start_conversation(demo.maya))
    refund = Refund.objects.create(order=demo.orders["SU-41310"], amount="1.00", reason="test", tool_call_id="t1")
    client = client_for(lead)
    for path, model in ((f"/admin/support/refund/{refund.pk}/change/", Refund),
                        (f"/admin/support/approval/{approval.pk}/change/", Approval)):
        page = client.get(path)
        assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
        assert client.post(path, {"reason": "edited"}).status_code == 403
    assert client.get("/admin/support/refund/add/").status_code == 403
    assert Refund.objects.get(pk=refund.pk).reason == "test"


def test_a_lead_may_edit_a_customer_and_an_agent_may_not(agent, lead, demo):
    path = f"/admin/support/customer/{demo.maya.pk}/change/"
    assert 'name="_save"' not in client_for(agent).get(path).content.decode()
    assert client_for(agent).post(path, {"name": "X", "email": demo.maya.email}).status_code == 403
    response = client_for(lead).post(path, {"name": "Maya Renamed", "email": demo.maya.email})
    assert response.status_code == 302
    assert Customer.objects.get(pk=demo.maya.pk).name == "Maya Renamed"


def test_staff_without_a_group_see_nothing(demo):
    bare = make_user("bare", staff=True, group=None)
    assert "have permission to view or edit anything" in client_for(bare).get("/admin/").content.decode()
    assert client_for(bare).get("/admin/support/order/").status_code == 403


# -- the console's 404 ----------------------------------------------------------------------------------

def test_an_unknown_conversation_page_is_a_404_in_the_console(agent):
    response = client_for(agent).get("/console/conversations/00000000-0000-0000-0000-000000000000/")
    assert response.status_code == 404
    text = response.content.decode()
    assert "There is no such conversation" in text and 'href="/console/"' in text
    assert 'data-page="not_found"' in text


def test_a_known_conversation_page_is_200(agent, demo, queued):
    conversation = start_conversation(demo.maya)
    assert client_for(agent).get(f"/console/conversations/{conversation.public_id}/").status_code == 200
