"""The setup checklist's "Import the policies" step (/console/setup/policies/): one POST imports the shop's
policies from where the shop itself serves them (the shop contract's GET /policies, Shopify's shop policies),
through the shop port, never from an address or a path typed in the form; a shop with no policy source is told
so plainly. The step is done once policies exist.

Who may do what: Lee is a support lead (support.edit_policies): imports. Sam, a support agent, is refused with a
403 (logged on support.security), nothing read or written."""

from __future__ import annotations

import logging

import pytest

from support.desk import policy_sources
from support.models import PolicyDocument
from support.profiles import setup
from tests.shop_fixture import KEY
from tests.shop_fixture import reference_shop, reference_shop_server  # noqa: F401
from tests.shopify_fixture import fake_shopify, fake_shopify_server  # noqa: F401
from tests.test_console_agent import others  # noqa: F401
from tests.test_policy_editor import as_lee, lee  # noqa: F401  (a support lead, signed in)

IMPORT, SETUP = "/console/setup/policies/", "/console/setup/"


@pytest.fixture
def no_policies(demo):
    PolicyDocument.objects.all().delete()


@pytest.fixture
def http_backend(settings, reference_shop):  # noqa: F811
    settings.SHOP_BACKEND, settings.SHOP_URL, settings.SHOP_API_KEY = "http", reference_shop.base_url, KEY
    return reference_shop


def step(key: str):
    return next(s for s in setup.steps(checks=None) if s.key == key)


def test_a_lead_imports_the_contract_shops_policies_and_the_step_is_done(as_lee, no_policies, http_backend):
    assert step("policies").state == setup.TODO
    done = as_lee.post(IMPORT)
    assert done.status_code == 302 and done["Location"] == SETUP
    docs = list(PolicyDocument.objects.order_by("doc_id"))
    assert len(docs) == 6 and all(d.source.startswith("shop:") for d in docs)
    assert {d.title for d in docs} >= {"Damaged items", "Wrong item received"}
    assert step("policies").state == setup.DONE
    page = as_lee.get(SETUP).content.decode()
    assert "added 6" in page.split("data-testid=\"setup-imported\"")[1]
    again = as_lee.post(IMPORT)  # the same words again: nothing new
    assert again.status_code == 302 and PolicyDocument.objects.count() == 6
    assert "unchanged 6" in as_lee.get(SETUP).content.decode()


def test_the_form_takes_no_address_or_path_and_the_shop_alone_is_read(as_lee, no_policies, http_backend,
                                                                       monkeypatch):
    asked = []
    monkeypatch.setattr(policy_sources, "fetch", lambda *a, **k: asked.append(a))
    monkeypatch.setattr(policy_sources, "from_path", lambda *a, **k: asked.append(a))
    as_lee.post(IMPORT, {"url": "http://169.254.169.254/latest/meta-data/", "path": "/etc/passwd",
                         "source": "file:///etc/passwd"})
    assert asked == []
    assert all(d.source.startswith("shop:") for d in PolicyDocument.objects.all())
    assert [r["path"] for r in http_backend.requests() if r["method"] == "GET"] == ["/policies"]


def test_a_policy_cannot_claim_another_documents_id(as_lee, demo, http_backend, monkeypatch):
    from support.shop import port, shop

    claims = [port.ShopPolicy(id="x", title="Returns", body="---\ndoc_id: POL-DAMAGE\n---\nAll refunds are free."),
              port.ShopPolicy(id="y", title="Terms", html=True,
                              body='<meta name="policy:doc_id" content="POL-WRONG"><p>Anything goes.</p>')]
    monkeypatch.setattr(type(shop()), "policies", lambda self: claims)
    before = {d.doc_id: d.body for d in PolicyDocument.objects.filter(doc_id__in=("POL-DAMAGE", "POL-WRONG"))}
    as_lee.post(IMPORT)
    after = {d.doc_id: d.body for d in PolicyDocument.objects.filter(doc_id__in=("POL-DAMAGE", "POL-WRONG"))}
    assert after == before
    assert PolicyDocument.objects.filter(source__startswith="shop:").count() == 2


def test_shopifys_shop_policies_are_imported_as_text(as_lee, no_policies, settings, fake_shopify):  # noqa: F811
    settings.SHOP_BACKEND = "shopify"
    as_lee.post(IMPORT)
    docs = list(PolicyDocument.objects.all())
    assert len(docs) == 6 and all(d.source.startswith("shop:") for d in docs)
    assert all("<p>" not in d.body for d in docs)
    assert PolicyDocument.objects.filter(source="shop:REFUND_POLICY").exists()


def test_a_shop_with_no_policy_source_is_told_plainly(as_lee, no_policies, settings):
    settings.SHOP_BACKEND = "demo"
    answer = as_lee.post(IMPORT)
    assert answer.status_code == 302 and not PolicyDocument.objects.exists()
    page = as_lee.get(SETUP).content.decode()
    assert "This shop serves no policies the desk can read" in page and step("policies").state == setup.TODO


def test_a_shop_that_cannot_be_reached_is_said_in_plain_words(as_lee, no_policies, http_backend):
    http_backend.configure(down=True)
    as_lee.post(IMPORT)
    page = as_lee.get(SETUP).content.decode()
    assert "The shop could not be reached" in page and not PolicyDocument.objects.exists()


def test_only_leads_import_the_policies(others, no_policies, http_backend, caplog):  # noqa: F811
    with caplog.at_level(logging.WARNING, logger="support.security"):
        refused = others.sam.post(IMPORT)
    assert refused.status_code == 403 and not PolicyDocument.objects.exists()
    assert http_backend.requests() == []
    assert any("edit_policies" in r.getMessage() for r in caplog.records)
    assert others.sam.get(IMPORT).status_code == 405
