"""The policies in the staff console: every staff member reads them, support leads (support.edit_policies)
write them. A save is a new version exactly as an import or an admin edit makes one, named after the editor
with their note; a save from a version someone has replaced since is refused with the text kept; hostile
text is shown inert everywhere.

Who may do what: Robin is staff with no group, Sam a support agent: both read the list, a policy and its
versions, and are refused every write with a 403 (logged on support.security). Lee and Kim are support
leads: they edit and create. Pat is not staff and reaches none of it.
"""

from __future__ import annotations

import logging

import pytest

from support.desk import permissions, policy_edit, selectors_policies
from support.desk.policy_import import save_policy
from support.desk.policy_sources import Refused, Source
from support.models import PolicyDocument, PolicyVersion
from support.tools.policies import search_policy
from support.web.policy_markdown import policy_html
from tests.desk_factories import make_user
from tests.test_inbox_admin import client_for as signed_in
from tests.test_staff_permissions import member

LIST, NEW = "/console/policies/", "/console/policies/+new/"
EDIT, PAGE = "/console/policies/POL-LOSS/edit/", "/console/policies/POL-LOSS/"
HOSTILE_TITLE = '<script>alert("title")</script> Returns'
HOSTILE_BODY = ('Fine print <img src=x onerror=alert(1)> and <script>alert("body")</script>\n\n'
                '[click me](javascript:alert(2)) and ![pic](https://tracker.example/p.png)')
HOSTILE_NOTE = '<b onmouseover="alert(3)">bold</b> note'


@pytest.fixture
def lee(demo):
    return member("lee", permissions.LEADS)


@pytest.fixture
def as_lee(lee):
    return signed_in(lee)


@pytest.fixture
def readers(demo):
    """Robin (staff, no group) and Sam (a support agent): they read, they may not write."""
    return [signed_in(member("robin", None)), signed_in(member("sam", permissions.AGENTS))]


def loss() -> PolicyDocument:
    return PolicyDocument.objects.get(doc_id="POL-LOSS")


def form(doc: PolicyDocument, *, body: str | None = None, note: str = "Claims window now 45 days",
         action: str = "save", based_on: int | None = None, **extra) -> dict:
    return {"title": doc.title, "body": doc.body if body is None else body, "applies_to": "", "note": note,
            "based_on": str(doc.version if based_on is None else based_on), "action": action, **extra}


def history(doc_id: str = "POL-LOSS") -> list[tuple]:
    return list(PolicyVersion.objects.filter(doc__doc_id=doc_id).order_by("version")
                .values_list("version", "changed_by", "note"))


def security_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "support.security" and r.levelno == logging.WARNING]


# -- who may read, who may write ----------------------------------------------------------------------------


def test_support_leads_have_the_permission_and_agents_do_not(demo, lee):
    assert lee.has_perm(permissions.EDIT_POLICIES)
    assert not member("sam", permissions.AGENTS).has_perm(permissions.EDIT_POLICIES)
    assert not member("robin", None).has_perm(permissions.EDIT_POLICIES)


def test_every_staff_member_reads_the_list_a_policy_and_its_versions(readers, as_lee):
    as_lee.post(EDIT, form(loss(), body=loss().body + "\n\nAlso on Sundays."))
    for client in [*readers, as_lee]:
        listing = client.get(LIST).content.decode()
        assert 'data-testid="nav-policies"' in listing and "Parcels marked delivered but not received" in listing
        assert client.get(PAGE).status_code == 200
        assert client.get(PAGE + "versions/1/").status_code == 200


def test_a_policy_called_new_is_reached_at_its_own_address(as_lee):
    PolicyDocument.objects.create(doc_id="new", title="Newsletter refunds", body="Newsletters are free.")
    page = as_lee.get("/console/policies/new/")
    assert page.status_code == 200 and "Newsletter refunds" in page.content.decode()
    assert as_lee.get(NEW).status_code == 200  # the page for writing a new policy is elsewhere


def test_only_staff_with_the_permission_are_offered_the_editor(readers, as_lee):
    for client in readers:
        assert 'data-testid="policy-new"' not in client.get(LIST).content.decode()
        page = client.get(PAGE).content.decode()
        assert 'data-testid="policy-edit"' not in page and 'data-testid="policy-read-only"' in page
    assert 'data-testid="policy-new"' in as_lee.get(LIST).content.decode()
    assert 'data-testid="policy-edit"' in as_lee.get(PAGE).content.decode()


def test_staff_without_the_permission_are_refused_every_write_and_it_is_logged(readers, caplog):
    before = (loss().version, loss().body, PolicyDocument.objects.count())
    with caplog.at_level(logging.WARNING, logger="support.security"):
        for client in readers:
            assert client.get(EDIT).status_code == 403
            assert client.get(NEW).status_code == 403
            refused = client.post(EDIT, form(loss(), body="Everything is refunded, always."))
            assert refused.status_code == 403 and "support.edit_policies" in refused.content.decode()
            assert client.post(NEW, {"title": "Mine", "body": "Mine.", "note": "n", "action": "save"}).status_code == 403
            assert client.post(EDIT, form(loss(), action="preview")).status_code == 403
    assert (loss().version, loss().body, PolicyDocument.objects.count()) == before and history() == []
    lines = security_lines(caplog)
    assert len(lines) == 10 and all("may read the policies but not change them" in line for line in lines)
    assert "robin (id" in lines[0] and "POST /console/policies/POL-LOSS/edit/" in lines[2]


def test_the_desk_refuses_a_write_without_the_permission_whatever_the_view_did(demo):
    sam = member("sam", permissions.AGENTS)
    draft = policy_edit.PolicyDraft("Loss", "Everything is refunded.", "", "sneaky")
    assert policy_edit.policy_save(user=sam, doc_id="POL-LOSS", draft=draft, based_on=1).code == "forbidden"
    assert policy_edit.policy_create(user=sam, draft=draft).code == "forbidden"
    assert loss().version == 1 and PolicyDocument.objects.filter(title="Loss").count() == 0


@pytest.mark.parametrize("path", [LIST, PAGE, EDIT, NEW, PAGE + "versions/1/"])
def test_customers_and_visitors_never_reach_the_policy_pages(demo, client, path):
    assert client.get(path).url.startswith("/accounts/login/")
    client.force_login(make_user("pat", staff=False))
    assert client.get(path).url.startswith("/accounts/login/")
    posted = client.post(path, form(loss(), body="Pat was here."))
    assert posted.status_code == 405 if path in (LIST, PAGE, PAGE + "versions/1/") else posted.url.startswith("/accounts/login/")
    assert loss().version == 1 and "Pat" not in loss().body


# -- saving: a new version, exactly as imports and the admin make them ----------------------------------------


def test_a_save_is_a_new_version_named_after_the_editor_with_the_note_and_the_agent_reads_it(as_lee, ctx_for):
    body = loss().body.replace("30 days", "45 days")
    saved = as_lee.post(EDIT, form(loss(), body=body))
    assert saved.status_code == 302 and saved.url == PAGE + "?saved=2"
    assert history() == [(1, "before versions", ""), (2, "console: lee", "Claims window now 45 days")]
    assert (loss().version, loss().body) == (2, body)
    (hit,) = [r for r in search_policy(ctx_for("maya@example.com"), "claim delivered missing parcel")["results"]
              if r["doc_id"] == "POL-LOSS"]
    assert hit["version"] == 2
    page = as_lee.get(saved.url).content.decode()
    assert "Saved as version 2" in page and "Claims window now 45 days" in page and "45 days of the delivered" in page


def test_a_save_from_the_console_and_one_from_the_admin_keep_one_history(as_lee, lee):
    as_lee.post(EDIT, form(loss(), body=loss().body + "\n\nFrom the console."))
    doc = loss()
    admin = as_lee.post(f"/admin/support/policydocument/{doc.pk}/change/",
                        {"title": doc.title, "body": doc.body + "\n\nFrom the admin.", "seller": ""})
    assert admin.status_code == 302
    assert [(v, who) for v, who, _ in history()] == [(1, "before versions"), (2, "console: lee"), (3, "admin: lee")]


def test_a_save_without_a_note_is_refused_and_keeps_the_text(as_lee):
    refused = as_lee.post(EDIT, form(loss(), body="My careful rewrite.", note="  "))
    page = refused.content.decode()
    assert refused.status_code == 400 and "Say in a few words what you changed" in page
    assert "My careful rewrite." in page and 'aria-invalid="true"' in page
    assert loss().version == 1 and history() == []


def test_saving_the_same_words_again_makes_no_new_version(as_lee):
    again = as_lee.post(EDIT, form(loss()))
    assert again.status_code == 200 and "Nothing changed, so no new version was saved." in again.content.decode()
    assert loss().version == 1 and history() == []


def test_the_preview_renders_the_markdown_and_saves_nothing(as_lee):
    shown = as_lee.post(EDIT, form(loss(), body="## Waiting\n\n- **48 hours** after the scan", note="", action="preview"))
    page = shown.content.decode()
    assert shown.status_code == 200 and 'data-testid="policy-preview-text"' in page
    assert "<h4>Waiting</h4>" in page and "<li><strong>48 hours</strong> after the scan</li>" in page
    assert loss().version == 1 and history() == []


def test_a_save_from_an_older_version_is_refused_with_who_saved_since_and_nothing_is_lost(as_lee):
    kim = signed_in(member("kim", permissions.LEADS))
    opened = loss()  # both open version 1
    assert kim.post(EDIT, form(opened, body=opened.body + "\n\nKim's sentence.", note="Kim's change")).status_code == 302
    mine = opened.body + "\n\nLee's sentence."
    refused = as_lee.post(EDIT, form(opened, body=mine, note="Lee's change", based_on=1))
    page = refused.content.decode()
    assert refused.status_code == 409 and 'data-testid="policy-conflict"' in page
    assert "kim saved version 2 while you were editing" in page and "Kim&#x27;s change" in page
    assert "Lee&#x27;s sentence." in page and 'name="based_on" value="2"' in page  # kept; the next Save is from v2
    assert "<del>Kim&#x27;s</del>" in page and "<ins>Lee&#x27;s</ins>" in page  # what differs, word by word
    assert (loss().version, loss().body) == (2, opened.body + "\n\nKim's sentence.")
    # Having seen version 2, Lee saves again from it: Lee's text becomes version 3, Kim's stays in the history.
    assert as_lee.post(EDIT, form(loss(), body=mine, note="Lee's change", based_on=2)).status_code == 302
    assert [(v, who) for v, who, _ in history()] == [(1, "before versions"), (2, "console: kim"), (3, "console: lee")]
    assert PolicyVersion.objects.get(doc__doc_id="POL-LOSS", version=2).body.endswith("Kim's sentence.")


def test_save_policy_checks_the_version_under_the_lock_and_imports_are_not_checked(demo):
    doc = loss()
    edit = Source(doc.doc_id, doc.title, doc.body + " Edited.", "console")
    assert save_policy(edit, "console: lee", note="one", based_on=1) == "updated"
    stale = save_policy(Source(doc.doc_id, doc.title, doc.body + " Other.", "console"), "console: kim", based_on=1)
    assert isinstance(stale, Refused) and stale.code == "stale_version"
    taken = save_policy(Source(doc.doc_id, "New", "New.", "console"), "console: kim", based_on=0)
    assert isinstance(taken, Refused) and taken.code == "duplicate_doc_id"
    assert save_policy(Source(doc.doc_id, doc.title, "Imported words.", "policies/loss.md")) == "updated"
    assert [(v, who, note) for v, who, note in history()] == [
        (1, "before versions", ""), (2, "console: lee", "one"), (3, "import", "")]


def test_a_new_policy_and_a_sellers_supplement_are_created_and_the_agent_finds_each_in_its_scope(as_lee, ctx_for):
    wide = as_lee.post(NEW, {"title": "Gift cards", "body": "Gift cards are never refunded in cash.",
                             "applies_to": "", "note": "First version", "action": "save"})
    supplement = as_lee.post(NEW, {"title": "Homeline gift wrapping", "body": "Gift wrapping is refunded with the item.",
                                   "applies_to": "S-HL", "note": "Asked by Homeline", "action": "save"})
    assert wide.status_code == supplement.status_code == 302
    gift = PolicyDocument.objects.get(title="Gift cards")
    wrap = PolicyDocument.objects.get(title="Homeline gift wrapping")
    assert gift.seller is None and wrap.seller.code == "S-HL" and gift.doc_id.startswith("POL-GIFT-CARDS-")
    assert wide.url == f"/console/policies/{gift.doc_id}/?saved=1"
    assert history(wrap.doc_id) == [(1, "console: lee", "Asked by Homeline")]
    ctx = ctx_for("maya@example.com")
    assert "Gift cards" in {r["title"] for r in search_policy(ctx, "gift cards refunded")["results"]}
    assert "Homeline gift wrapping" not in {r["title"] for r in search_policy(ctx, "gift wrapping refunded")["results"]}
    found = {r["title"]: r for r in search_policy(ctx, "gift wrapping refunded", "S-HL")["results"]}
    assert found["Homeline gift wrapping"]["version"] == 1 and found["Homeline gift wrapping"]["scope"] == "seller"


def test_a_new_policy_needs_a_title_a_text_a_note_and_a_seller_that_exists(as_lee):
    count = PolicyDocument.objects.count()
    empty = as_lee.post(NEW, {"title": " ", "body": "", "applies_to": "", "note": "", "action": "save"}).content.decode()
    assert "Give the policy a title." in empty and "Write what the policy says." in empty
    unknown = as_lee.post(NEW, {"title": "T", "body": "B", "applies_to": "S-NOPE", "note": "n", "action": "save"})
    assert unknown.status_code == 400 and "Choose all of Sundry or one of the sellers listed." in unknown.content.decode()
    assert PolicyDocument.objects.count() == count


# -- reading the history ------------------------------------------------------------------------------------


def test_an_older_version_is_shown_with_the_words_changed_since(as_lee, readers):
    as_lee.post(EDIT, form(loss(), body=loss().body.replace("within 30 days", "within 45 days")))
    for client in readers:
        page = client.get(PAGE + "versions/1/").content.decode()
        assert "What changed from version 1 to the current version (2)" in page
        assert "<del>30</del>" in page and "<ins>45</ins>" in page
        listing = client.get(PAGE).content.decode()
        assert 'href="/console/policies/POL-LOSS/versions/1/"' in listing and "lee" in listing
        assert client.get(PAGE + "versions/9/").status_code == 404
        assert client.get("/console/policies/POL-NOPE/").status_code == 404


def test_the_history_names_the_person_by_their_first_name(demo):
    lead = member("lee", permissions.LEADS)
    lead.first_name = "Lee Ann"
    lead.save()
    client = signed_in(lead)
    client.post(EDIT, form(loss(), body=loss().body + " More."))
    (latest, before) = selectors_policies.policy_history(loss())
    assert (latest.who, latest.how_label, before.how_label) == ("Lee Ann", "Console", "As first set up")
    assert "Lee Ann" in client.get(LIST).content.decode()


def test_hostile_text_is_shown_inert_in_the_preview_the_page_the_list_and_the_history(as_lee):
    preview = as_lee.post(NEW, {"title": HOSTILE_TITLE, "body": HOSTILE_BODY, "note": HOSTILE_NOTE,
                                "action": "preview"}).content.decode()
    created = as_lee.post(NEW, {"title": HOSTILE_TITLE, "body": HOSTILE_BODY, "note": HOSTILE_NOTE, "action": "save"})
    doc = PolicyDocument.objects.get(title=HOSTILE_TITLE)
    as_lee.post(f"/console/policies/{doc.doc_id}/edit/", form(doc, body=HOSTILE_BODY + "\n\n<iframe src=x>",
                                                               note=HOSTILE_NOTE))
    pages = [preview, as_lee.get(created.url).content.decode(), as_lee.get(LIST).content.decode(),
             as_lee.get(f"/console/policies/{doc.doc_id}/versions/1/").content.decode(),
             as_lee.get(f"/console/policies/{doc.doc_id}/edit/").content.decode()]
    for page in pages:
        for raw in ("<script>alert", "<img src=x", "<iframe", "<b onmouseover", 'href="javascript:',
                    'src="https://tracker.example'):
            assert raw not in page, raw
        assert "&lt;script&gt;alert(&quot;title&quot;)&lt;/script&gt; Returns" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in pages[0] and "[image: pic]" in pages[0]
    assert "&lt;b onmouseover=&quot;alert(3)&quot;&gt;bold&lt;/b&gt; note" in pages[1]  # the note, in the history
    assert "&lt;iframe src=x&gt;" in pages[3]  # in the differences


# -- the pieces -----------------------------------------------------------------------------------------------


def test_the_markdown_allows_web_and_mail_links_only_names_images_and_shifts_headings():
    html = str(policy_html("# Top\n\n[web](https://sundry.example/returns) [mail](mailto:help@sundry.example) "
                           "[js](javascript:alert(1)) [data](data:text/html,<b>x</b>) [rel](/console/)\n\n"
                           "![a photo](https://tracker.example/p.png)\n\n<div onclick=x>raw</div>"))
    assert "<h3>Top</h3>" in html and "<h1>" not in html
    assert '<a href="https://sundry.example/returns" rel="nofollow noopener noreferrer">web</a>' in html
    assert '<a href="mailto:help@sundry.example"' in html
    assert html.count("<a ") == 2 and "javascript:" not in html.replace("[js](javascript:", "")
    assert "<img" not in html and "[image: a photo]" in html and "&lt;div onclick=x&gt;raw&lt;/div&gt;" in html


def test_the_differences_mark_lines_and_the_words_changed_within_them():
    old = "Title: Loss\nApplies to: all of Sundry\n\nWait 2 days.\nThen refund.\nKeep this.\nAnd this.\nEnd."
    new = "Title: Loss\nApplies to: all of Sundry\n\nWait 3 days.\nThen refund.\nKeep this.\nAnd this.\nEnd.\nNew line."
    lines = selectors_policies.policy_diff(old, new, context=1)
    kinds = [line.kind for line in lines]
    assert kinds == ["same", "removed", "added", "same", "gap", "same", "added"]
    assert (True, "2") in lines[1].parts and (True, "3") in lines[2].parts and (False, "Wait ") in lines[1].parts
    assert selectors_policies.policy_diff(old, old) == []
