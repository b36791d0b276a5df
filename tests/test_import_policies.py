"""manage.py import_policies: the shop's own policies from Markdown folders, HTML pages and sitemaps, served
here by a real HTTP server on a free port. A changed document gets a new version and the old one is kept;
an unchanged one is left alone; bad input is refused in plain words and never half saved. The agent's
search and the approval card cite the version read.
"""

from __future__ import annotations

import io
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.management import call_command

from support.desk import policy_import, runner, serializers, services
from support.desk.policy_sources import Source, derived_doc_id
from support.models import Approval, PolicyDocument, PolicyVersion
from support.tools.policies import search_policy

RETURNS = "# Returns of opened items\n\nOpened kitchen gadgets may be returned within 30 days for store credit.\n"
WARRANTY = "---\ndoc_id: POL-OWN-WARRANTY\n---\n# Warranty\n\nEvery blender carries a two year warranty.\n"
HL_SUPPLEMENT = ("---\ndoc_id: POL-OWN-HL-GLASS\nseller: S-HL\nscope: seller\n---\n# Glassware\n\n"
                 "Broken glassware from this seller is replaced, never repaired.\n")


def run(*sources: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_policies", *[str(s) for s in sources], stdout=out, stderr=err)
    return out.getvalue().strip(), err.getvalue()


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "returns.md").write_text(RETURNS)
    (tmp_path / "warranty.md").write_text(WARRANTY)
    (tmp_path / "sellers").mkdir()
    (tmp_path / "sellers" / "hl-glass.markdown").write_text(HL_SUPPLEMENT)
    return tmp_path


def all_refused(sources, *reasons: str) -> None:
    """Every source refused, each reason printed, nothing saved."""
    out, err = run(*sources)
    assert out == f"added 0, updated 0, unchanged 0, refused {len(reasons)}"
    assert [reason for reason in reasons if reason not in err] == []
    assert not PolicyDocument.objects.exists()


def titles(ctx, query, seller_id=None) -> dict[str, dict]:
    return {r["title"]: r for r in search_policy(ctx("maya@example.com"), query, seller_id)["results"]}


# -- Markdown folders -------------------------------------------------------------------------------------


def test_a_folder_of_markdown_is_imported_and_the_agent_finds_it(folder, ctx_for):
    out, err = run(folder)
    assert out == "added 3, updated 0, unchanged 0, refused 0" and err == ""
    found = titles(ctx_for, "return opened kitchen gadget")
    assert found["Returns of opened items"]["version"] == 1
    assert "30 days for store credit" in found["Returns of opened items"]["excerpt"]
    assert "# Returns" not in found["Returns of opened items"]["excerpt"]  # the heading became the title
    assert titles(ctx_for, "blender warranty")["Warranty"]["doc_id"] == "POL-OWN-WARRANTY"


def test_a_sellers_supplement_is_found_only_with_that_seller(folder, ctx_for):
    run(folder)
    assert "Glassware" not in titles(ctx_for, "broken glassware replaced")
    hit = titles(ctx_for, "broken glassware replaced", "S-HL")["Glassware"]
    assert (hit["scope"], hit["seller_id"]) == ("seller", "S-HL")


def test_reimporting_versions_only_the_changed_file_and_keeps_the_old_words(folder, demo):
    run(folder)
    (folder / "returns.md").write_text(RETURNS.replace("30 days", "45 days"))
    out, _ = run(folder)
    assert out == "added 0, updated 1, unchanged 2, refused 0"
    returns = PolicyDocument.objects.get(title="Returns of opened items")
    assert returns.version == 2 and "45 days" in returns.body
    assert [(v.version, "30 days" in v.body, v.changed_by) for v in returns.versions.all()] == [
        (1, True, "import"), (2, False, "import")]
    assert PolicyDocument.objects.get(doc_id="POL-OWN-WARRANTY").version == 1
    assert PolicyVersion.objects.filter(changed_by="import").count() == 4
    assert run(folder)[0] == "added 0, updated 0, unchanged 3, refused 0"


def test_a_derived_doc_id_is_stable_and_tells_same_named_files_apart(tmp_path, db):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    (tmp_path / "a" / "faq.md").write_text("# FAQ A\n\nGift wrapping is free.\n")
    (tmp_path / "b" / "faq.md").write_text("# FAQ B\n\nGift cards never expire.\n")
    assert run(tmp_path)[0] == "added 2, updated 0, unchanged 0, refused 0"
    assert derived_doc_id("a/faq.md") == derived_doc_id("a/faq.md") != derived_doc_id("b/faq.md")
    assert set(PolicyDocument.objects.filter(title__startswith="FAQ").values_list("doc_id", flat=True)) == {
        derived_doc_id("a/faq.md"), derived_doc_id("b/faq.md")}


def test_a_seeded_policy_replaced_by_an_import_keeps_what_it_said_before(tmp_path, demo):
    seeded = PolicyDocument.objects.filter(seller__isnull=True).first()
    (tmp_path / "p.md").write_text(f"---\ndoc_id: {seeded.doc_id}\n---\n# {seeded.title}\n\nNew words.\n")
    assert run(tmp_path)[0] == "added 0, updated 1, unchanged 0, refused 0"
    history = list(PolicyVersion.objects.filter(doc__doc_id=seeded.doc_id).values_list("version", "body", "changed_by"))
    assert history == [(1, seeded.body, "before versions"), (2, "New words.", "import")]


def test_one_document_is_saved_whole_or_not_at_all(folder, demo, monkeypatch):
    run(folder)
    (folder / "returns.md").write_text(RETURNS.replace("30 days", "45 days"))

    def history_fails(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(policy_import, "_keep", history_fails)
    with pytest.raises(RuntimeError):
        run(folder / "returns.md")
    returns = PolicyDocument.objects.get(title="Returns of opened items")
    assert returns.version == 1 and "30 days" in returns.body


def test_bad_front_matter_and_unknown_sellers_are_refused_and_the_rest_imported(tmp_path, db):
    (tmp_path / "good.md").write_text(RETURNS)
    (tmp_path / "unknown.md").write_text("---\nseller: S-NOPE\n---\n# X\n\nWords.\n")
    (tmp_path / "scope.md").write_text("---\nscope: sundry\nseller: S-HL\n---\n# X\n\nWords.\n")
    (tmp_path / "key.md").write_text("---\npassword: hunter2\n---\n# X\n\nWords.\n")
    out, err = run(tmp_path)
    assert out == "added 1, updated 0, unchanged 0, refused 3"
    assert "no seller has the code 'S-NOPE' [unknown_seller]" in err
    assert "scope: sundry cannot name a seller [bad_front_matter]" in err
    assert "is not one of doc_id, title, seller, scope [bad_front_matter]" in err
    assert PolicyDocument.objects.count() == 1


def test_two_sources_claiming_one_doc_id_and_empty_documents_are_refused(tmp_path, db):
    (tmp_path / "a.md").write_text("---\ndoc_id: POL-SAME\n---\n# A\n\nFirst words.\n")
    (tmp_path / "b.md").write_text("---\ndoc_id: POL-SAME\n---\n# B\n\nSecond words.\n")
    (tmp_path / "empty.html").write_text("<html><body><script>only code</script></body></html>")
    out, err = run(tmp_path)
    assert out == "added 1, updated 0, unchanged 0, refused 2"
    assert "another source of this import already has the doc_id POL-SAME [duplicate_doc_id]" in err
    assert "empty.html: it has no text [no_text]" in err
    assert PolicyDocument.objects.get(doc_id="POL-SAME").body == "First words."


# -- hostile files ------------------------------------------------------------------------------------------


def test_huge_binary_and_other_files_are_refused_in_plain_words(tmp_path, db, settings):
    settings.POLICY_IMPORT_MAX_BYTES = 5000
    (tmp_path / "huge.md").write_text("# Huge\n\n" + "word " * 2000)
    (tmp_path / "binary.md").write_bytes(b"# Bin\n\x00\x01\x02\xff")
    (tmp_path / "latin1.md").write_bytes("# Caf\xe9\n".encode("latin-1"))
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n")
    all_refused([tmp_path, tmp_path / "missing.md"],
                "huge.md: it is larger than 5000 bytes [too_large]",
                "binary.md: it is not HTML or Markdown (binary data) [not_policy_text]",
                "latin1.md: it is not HTML or Markdown (not UTF-8 text) [not_policy_text]",
                "photo.png: it is not HTML or Markdown (by its name) [not_policy_text]",
                "missing.md: no such file or folder [not_found]")


def test_a_script_in_markdown_or_an_html_file_is_never_imported(tmp_path, db):
    (tmp_path / "a.md").write_text("# Fees\n\nNo fees.<script>alert('stolen')</script>\n")
    (tmp_path / "b.html").write_text("<html><head><title>T</title><style>p{color:red}</style></head><body>"
                                     "<h1>Exchanges</h1><p>Exchange <b>any</b> size.</p>"
                                     "<script>document.cookie</script></body></html>")
    assert run(tmp_path)[0] == "added 2, updated 0, unchanged 0, refused 0"
    fees, exchanges = PolicyDocument.objects.get(title="Fees"), PolicyDocument.objects.get(title="Exchanges")
    assert "No fees." in fees.body and "alert" not in fees.body and "<" not in fees.body
    assert "Exchange" in exchanges.body and "any" in exchanges.body
    assert not any(bad in exchanges.body for bad in ("<", "cookie", "color"))


def test_file_and_other_schemes_are_refused(db):
    out, err = run("file:///etc/passwd", "ftp://example.com/policy.md")
    assert out == "added 0, updated 0, unchanged 0, refused 2"
    assert err.count("only http and https addresses are fetched [fetch_failed]") == 2


# -- the web, served locally --------------------------------------------------------------------------------


PAGE = ("<!doctype html><html><head><title>Shipping | Shop</title><script>var secret = 'token';</script></head>"
        "<body><nav>Home Cart</nav><main><h1>Shipping times</h1><p>Orders ship within 2 working days.</p>"
        "<noscript>enable js</noscript></main><footer>© Shop</footer></body></html>")


class Site:
    """What the local server answers: path -> (status, headers, body); '/slow' waits before answering."""

    def __init__(self):
        self.routes: dict[str, tuple[int, dict, bytes]] = {}
        self.url = ""

    def add(self, path, body, content_type="text/html; charset=utf-8", status=200, **headers):
        self.routes[path] = (status, {"Content-Type": content_type, **headers},
                             body.encode() if isinstance(body, str) else body)


@pytest.fixture
def site(settings):
    settings.POLICY_IMPORT_PRIVATE_NETWORK = True  # the test's server is on 127.0.0.1: the operator's opt-in
    site = Site()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/slow":
                time.sleep(3)
            if self.path == "/endless":  # no Content-Length: the body ends when the server stops, here never soon
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                try:
                    for _ in range(10_000):  # 10 MB unless the importer hangs up first
                        self.wfile.write(b"<p>" + b"x" * 1017 + b"</p>")
                except OSError:
                    pass
                return
            status, headers, body = site.routes.get(self.path, (404, {}, b"not here"))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:  # the importer hung up on a body too large or too slow
                pass

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    site.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield site
    server.shutdown()
    server.server_close()


def test_an_html_page_by_url_is_imported_as_text(site, ctx_for):
    site.add("/policies/shipping", PAGE)
    out, err = run(f"{site.url}/policies/shipping")
    assert (out, err) == ("added 1, updated 0, unchanged 0, refused 0", "")
    doc = PolicyDocument.objects.get(source=f"{site.url}/policies/shipping")
    assert doc.title == "Shipping times" and doc.body == "Orders ship within 2 working days."
    assert titles(ctx_for, "how long until my order ships")["Shipping times"]["version"] == 1


def test_a_sitemap_imports_each_page_it_names(site, db):
    site.add("/policies/shipping", PAGE)
    site.add("/policies/returns.md", RETURNS, "text/markdown")
    site.add("/policies/gone", "no")  # listed, then answered 404 below
    site.routes.pop("/policies/gone")
    sitemap = ('<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
               f"<url><loc>{site.url}/policies/shipping</loc></url><url><loc>/policies/returns.md</loc></url>"
               "<url><loc>/policies/gone</loc></url><url><loc>https://elsewhere.example/p</loc></url></urlset>")
    site.add("/sitemap.xml", sitemap, "application/xml")
    out, err = run(f"{site.url}/sitemap.xml")
    assert out == "added 2, updated 0, unchanged 0, refused 2"
    assert "/policies/gone: the server answered 404 [fetch_failed]" in err
    assert "elsewhere.example/p: the sitemap's page is on another site" in err
    assert set(PolicyDocument.objects.values_list("title", flat=True)) == {"Shipping times", "Returns of opened items"}
    site.add("/policies/shipping", PAGE.replace("2 working days", "3 working days"))
    assert run(f"{site.url}/sitemap.xml")[0] == "added 0, updated 1, unchanged 1, refused 2"
    assert PolicyDocument.objects.get(title="Shipping times").version == 2


def test_a_sitemap_index_is_followed_one_level_deep(site, db):
    site.add("/policies/shipping", PAGE)
    site.add("/pages.xml", f"<urlset><url><loc>{site.url}/policies/shipping</loc></url></urlset>", "text/xml")
    site.add("/deeper.xml", "<sitemapindex><sitemap><loc>/index.xml</loc></sitemap></sitemapindex>", "text/xml")
    site.add("/index.xml", "<sitemapindex><sitemap><loc>/pages.xml</loc></sitemap>"
                           "<sitemap><loc>/deeper.xml</loc></sitemap></sitemapindex>", "text/xml")
    out, err = run(f"{site.url}/index.xml")
    assert out == "added 1, updated 0, unchanged 0, refused 1"
    assert "/deeper.xml: a sitemap index inside a sitemap index is not followed [not_policy_text]" in err
    assert PolicyDocument.objects.get().title == "Shipping times"


def test_hostile_pages_are_refused_in_plain_words(site, db, settings):
    settings.POLICY_IMPORT_MAX_BYTES = 5000
    settings.POLICY_IMPORT_TIMEOUT_SECONDS = 0.5
    site.add("/huge", "<p>" + "x" * 6000 + "</p>")
    site.add("/image", b"\x89PNG\r\n\x00", "image/png")
    site.add("/to-file", "", status=302, Location="file:///etc/passwd")
    site.add("/loop", "", status=302, Location="/loop")
    site.add("/slow", PAGE)
    all_refused([f"{site.url}/{path}" for path in ("huge", "endless", "image", "to-file", "loop", "slow")],
                "/huge: it is larger than 5000 bytes [too_large]",
                "/endless: it is larger than 5000 bytes [too_large]",
                "/image: it is not HTML or Markdown (binary data) [not_policy_text]",
                "/to-file: only http and https addresses are fetched [fetch_failed]",
                "/loop: more than 5 redirects [fetch_failed]",
                "/slow: the server took too long to answer [fetch_failed]")


def test_a_redirect_to_another_http_page_is_followed(site, db):
    site.add("/old", "", status=301, Location="/new")
    site.add("/new", PAGE)
    assert run(f"{site.url}/old")[0] == "added 1, updated 0, unchanged 0, refused 0"
    assert PolicyDocument.objects.get().doc_id == derived_doc_id(f"{site.url}/old")


# -- the import stays on the operator's site ---------------------------------------------------------------


def test_a_redirect_to_another_host_is_refused_and_nothing_of_it_imported(site, db):
    port = site.url.rsplit(":", 1)[1]
    site.add("/returns", "", status=302, Location=f"http://localhost:{port}/elsewhere")  # same server, other host
    site.add("/elsewhere", PAGE)
    all_refused([f"{site.url}/returns"], "/returns: it redirects to another site (localhost) [fetch_failed]")


def test_a_nested_sitemap_keeps_the_site_of_the_url_the_operator_gave(site, db):
    other = site.url.replace("127.0.0.1", "localhost")
    site.add("/policies/shipping", PAGE)
    site.add("/index.xml", "<sitemapindex><sitemap><loc>/pages.xml</loc></sitemap></sitemapindex>", "text/xml")
    site.add("/pages.xml", "", status=301, Location=f"{other}/moved.xml")
    site.add("/moved.xml", f"<urlset><url><loc>{other}/policies/shipping</loc></url></urlset>", "text/xml")
    all_refused([f"{site.url}/index.xml"], "/pages.xml: it redirects to another site (localhost) [fetch_failed]")


def test_loopback_private_and_link_local_addresses_are_refused_unless_the_operator_opts_in(site, db, settings):
    site.add("/policies/shipping", PAGE)
    settings.POLICY_IMPORT_PRIVATE_NETWORK = False
    all_refused([f"{site.url}/policies/shipping", "http://10.1.2.3/p", "http://169.254.169.254/latest/",
                 "http://[::1]/p", "http://localhost/p"],
                "127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "localhost")
    out, err = run(f"{site.url}/policies/shipping", "http://169.254.169.254/latest/")
    assert err.count("; POLICY_IMPORT_PRIVATE_NETWORK is off) [fetch_failed]") == 2
    settings.POLICY_IMPORT_PRIVATE_NETWORK = True
    assert run(f"{site.url}/policies/shipping")[0] == "added 1, updated 0, unchanged 0, refused 0"


def test_every_address_a_host_name_resolves_to_is_checked(db, settings, monkeypatch):
    settings.POLICY_IMPORT_PRIVATE_NETWORK = False
    connected = []

    def resolve(host, port, *args, **kwargs):
        addresses = {"shop.example": ["93.184.216.34", "10.0.0.5"], "nowhere.example": []}[host]
        if not addresses:
            raise socket.gaierror("no such host")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: connected.append(a) or 1 / 0)
    all_refused(["https://shop.example/returns", "https://nowhere.example/returns"],
                "shop.example/returns: it is on a private or local network (10.0.0.5;",
                "nowhere.example/returns: its host name could not be resolved [fetch_failed]")
    assert connected == []


def test_a_page_cannot_claim_the_doc_id_of_a_policy_from_another_source(site, tmp_path, demo):
    seeded = PolicyDocument.objects.filter(seller__isnull=True).first()
    (tmp_path / "warranty.md").write_text(WARRANTY)
    run(tmp_path)
    for doc_id in (seeded.doc_id, "POL-OWN-WARRANTY"):
        site.add(f"/claims/{doc_id}", PAGE.replace("<head>", f'<head><meta name="policy:doc_id" content="{doc_id}">'))
    out, err = run(*(f"{site.url}/claims/{d}" for d in (seeded.doc_id, "POL-OWN-WARRANTY")))
    assert out == "added 0, updated 0, unchanged 0, refused 2"
    assert err.count("came from another source; a page may only update its own [doc_id_taken]") == 2
    assert PolicyDocument.objects.get(doc_id=seeded.doc_id).body == seeded.body
    assert "two year warranty" in PolicyDocument.objects.get(doc_id="POL-OWN-WARRANTY").body
    # The page that first brought a doc_id updates it as before.
    site.add("/own", PAGE.replace("<head>", '<head><meta name="policy:doc_id" content="POL-OWN-SHIPPING">'))
    assert run(f"{site.url}/own")[0] == "added 1, updated 0, unchanged 0, refused 0"
    site.add("/own", PAGE.replace("<head>", '<head><meta name="policy:doc_id" content="POL-OWN-SHIPPING">')
             .replace("2 working days", "3 working days"))
    assert run(f"{site.url}/own")[0] == "added 0, updated 1, unchanged 0, refused 0"


# -- the approval card cites the version read ---------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_approval_card_cites_the_version_the_agent_read(desk, queued):
    for doc in PolicyDocument.objects.select_related("seller"):
        policy_import.save_policy(Source(doc.doc_id, doc.title, doc.body + "\n\nRevised.", "policies/",
                                         doc.seller.code if doc.seller else ""))
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text="My parcel SU-41310 never came.")
    run_id = queued.pop()
    assert runner.run_execute(run_id) == "awaiting_approval"
    policies = serializers.approval_json(Approval.objects.get(run_id=run_id))["context"]["policies"]
    assert policies and [p["version"] for p in policies] == [2] * len(policies)


# -- an edit in the admin is versioned too ------------------------------------------------------------------


def test_an_edit_in_the_admin_is_a_new_version_and_the_old_words_are_kept(demo):
    from django.test import Client

    from support.desk import demo as demo_data

    lead = demo_data.demo_staff_user(password="pw")  # the demo login: a Support lead
    client = Client()
    client.force_login(lead)
    doc = PolicyDocument.objects.filter(seller__isnull=True).first()
    path = f"/admin/support/policydocument/{doc.pk}/change/"
    form = {"title": doc.title, "body": doc.body + "\n\nAlso on Sundays.", "seller": ""}
    assert client.post(path, form).status_code == 302
    assert client.post(path, form).status_code == 302  # the same words again: no new version
    history = list(PolicyVersion.objects.filter(doc=doc).values_list("version", "changed_by"))
    assert history == [(1, "before versions"), (2, f"admin: {lead.get_username()}")]
    assert PolicyDocument.objects.get(pk=doc.pk).version == 2
