"""The console speaks of the shop it serves: its name comes from the live agent profile, on every page's frame,
the sign-in page and the invitation e-mail; on the demo that is Sundry."""

from __future__ import annotations

import pytest
from django.core import mail
from django.test import Client

from support.team import invitations
from tests.desk_factories import make_user
from tests.hearth_and_loom import UNWANTED, hearth_and_loom  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def lee(db):
    return make_user("lee", staff=True, group="leads", first_name="Lee")


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("path", ["/console/", "/console/approvals/", "/console/policies/", "/console/team/",
                                  "/console/agent/", "/console/settings/"])
def test_every_console_page_names_the_shop_of_the_live_profile(hearth_and_loom, lee, path):
    page = signed_in(lee).get(path, follow=True).content.decode()
    assert "Hearth &amp; Loom support desk</title>" in page
    assert 'data-shop-name="Hearth &amp; Loom"' in page
    shown = page.replace("sundry-widget", "").replace("sundry-standin", "")  # a storage key; the model's name
    assert not UNWANTED.search(shown), UNWANTED.search(shown)


def test_the_sign_in_page_and_the_invitation_name_the_shop(hearth_and_loom, lee):
    assert "Hearth &amp; Loom support desk" in Client().get("/accounts/login/").content.decode()
    invitations.invitation_send(by=lee, email="nia@example.com", role="agent", team=None)
    sent = mail.outbox[-1]
    assert sent.subject == "Lee invites you to the Hearth & Loom support desk"
    assert "Hearth & Loom support desk" in sent.body and not UNWANTED.search(sent.body + sent.subject)


def test_the_demo_console_still_says_sundry(lee):
    assert "Sundry <span>support desk</span>" in signed_in(lee).get("/console/").content.decode()
