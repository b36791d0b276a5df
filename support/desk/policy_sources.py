"""Reading policies for `manage.py import_policies`: Markdown files (or folders of them), HTML pages by
file or URL, and a sitemap's pages. Each source becomes a Source (what to save) or a Refused (why not,
in plain words, with a stable code). Nothing here writes to the database: policy_import.py does.

Fetching is careful: only http and https, on the host of the URL the operator gave (a redirect is followed
only to http(s) on that host, and at most a few times; a sitemap's pages and nested sitemaps only on it), never
to a loopback, private or link-local address unless POLICY_IMPORT_PRIVATE_NETWORK (every address the host
resolves to is checked, at each hop), every request has POLICY_IMPORT_TIMEOUT_SECONDS, and a body larger than
POLICY_IMPORT_MAX_BYTES is refused without being read in full.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import socket
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx2
from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning
from django.conf import settings

from support.shop.port import ShopPolicy

MARKDOWN_SUFFIXES = (".md", ".markdown")
HTML_SUFFIXES = (".html", ".htm")
HTML_TYPES = ("text/html", "application/xhtml+xml")
MARKDOWN_TYPES = ("text/markdown", "text/x-markdown", "text/plain")
XML_TYPES = ("application/xml", "text/xml")
MAX_REDIRECTS = 5
SITEMAP_PAGES = 500  # the most pages one sitemap may name
SITEMAPS_IN_INDEX = 20  # the most sitemaps one sitemap index may name
# Elements whose text is never policy: code, styling, and the page's furniture.
NOT_TEXT = ("script", "style", "noscript", "template", "iframe", "object", "svg", "nav", "header", "footer", "form")
DOC_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")
FRONT_MATTER_KEYS = ("doc_id", "title", "seller", "scope")


@dataclass(frozen=True)
class Source:
    """A policy read from one file or page, not yet saved."""

    doc_id: str
    title: str
    body: str
    source: str  # the path or URL, as given
    seller_code: str = ""  # empty: a Sundry-wide policy
    scope: str = ""  # "sundry" or "seller" when the front matter says so


@dataclass(frozen=True)
class Refused:
    source: str
    code: str  # stable: too_large, not_policy_text, fetch_failed, not_found, bad_front_matter, no_text
    why: str  # plain words


class Refusal(Exception):
    def __init__(self, code: str, why: str):
        super().__init__(why)
        self.code, self.why = code, why


# --- identifiers -----------------------------------------------------------------------------------------


def derived_doc_id(key: str) -> str:
    """A doc_id that stays the same for the same path or URL: a readable slug of its last part and a short
    hash of the whole, so two `returns.md` in different folders never meet. At most 40 characters."""
    last = re.split(r"[/\\]", key.rstrip("/\\"))[-1] or key
    last = re.sub(r"\.(md|markdown|html?)$", "", last, flags=re.IGNORECASE)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", last).strip("-").upper()[:26] or "PAGE"
    return f"POL-{slug}-{hashlib.sha256(key.encode()).hexdigest()[:8].upper()}"


# --- Markdown and HTML to a title and a body ---------------------------------------------------------------


def parse_front_matter(text: str) -> tuple[dict[str, str], str]:
    """`---` lines around `key: value` pairs at the very top; only the keys we know, plain strings."""
    if not text.startswith("---"):
        return {}, text
    lines = text.splitlines()
    try:
        end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() == "---")
    except StopIteration:
        raise Refusal("bad_front_matter", "the front matter at the top is never closed with ---") from None
    meta = {}
    for line in lines[1:end]:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if not sep or key not in FRONT_MATTER_KEYS:
            raise Refusal("bad_front_matter", f"the front matter line {line.strip()[:60]!r} is not one of "
                                              f"{', '.join(FRONT_MATTER_KEYS)}")
        meta[key] = value.strip().strip("\"'")
    return meta, "\n".join(lines[end + 1:])


def markdown_policy(text: str, key: str, source: str) -> Source:
    meta, body = parse_front_matter(text)
    if re.search(r"<[A-Za-z!/]", body):  # raw HTML in the Markdown: keep its words, never its scripts
        body = _text_of(BeautifulSoup(body, "html.parser"))
    title = meta.get("title", "")
    heading = re.search(r"^#[ \t]+(.+?)[ \t#]*$", body, flags=re.MULTILINE)
    if heading and not title:
        title = heading.group(1).strip()
        body = body[: heading.start()] + body[heading.end():]
    return _checked(meta, title, body, key, source)


def html_policy(raw: str, key: str, source: str) -> Source:
    soup = BeautifulSoup(raw, "html.parser")
    meta = {name: (tag.get("content") or "").strip() for name in ("doc_id", "seller", "scope")
            if (tag := soup.find("meta", attrs={"name": f"policy:{name}"})) is not None}
    heading = soup.find("h1")
    title = heading.get_text(" ", strip=True) if heading else ""
    if not title and soup.title:
        title = soup.title.get_text(" ", strip=True)
    if heading:
        heading.decompose()
    main = soup.find("main") or soup.find("article") or soup.body or soup
    return _checked(meta, title, _text_of(main), key, source)


def _text_of(node) -> str:
    for tag in node.find_all(NOT_TEXT):
        tag.decompose()
    return node.get_text("\n")


def _checked(meta: dict[str, str], title: str, body: str, key: str, source: str) -> Source:
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in body.strip().splitlines())).strip()
    doc_id = meta.get("doc_id") or derived_doc_id(key)
    if not DOC_ID.match(doc_id):
        raise Refusal("bad_front_matter", "doc_id must be 1 to 40 letters, digits, dots, dashes or underscores")
    seller, scope = meta.get("seller", ""), meta.get("scope", "").lower()
    if scope not in ("", "sundry", "seller"):
        raise Refusal("bad_front_matter", "scope must be sundry or seller")
    if scope == "seller" and not seller:
        raise Refusal("bad_front_matter", "scope: seller needs the seller's code")
    if scope == "sundry" and seller:
        raise Refusal("bad_front_matter", "scope: sundry cannot name a seller")
    if not body:
        raise Refusal("no_text", "it has no text")
    title = " ".join((title or doc_id).split())[:200]
    return Source(doc_id, title, body, source, seller, scope)


def _decoded(data: bytes) -> str:
    if b"\x00" in data:
        raise Refusal("not_policy_text", "it is not HTML or Markdown (binary data)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Refusal("not_policy_text", "it is not HTML or Markdown (not UTF-8 text)") from None


# --- files -------------------------------------------------------------------------------------------------


def from_path(arg: str) -> Iterator[Source | Refused]:
    path = Path(arg)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        for file in files:
            if file.suffix.lower() in MARKDOWN_SUFFIXES + HTML_SUFFIXES:
                yield _one_file(file, file.relative_to(path).as_posix(), str(file))
            else:
                yield Refused(str(file), "not_policy_text", "it is not HTML or Markdown (by its name)")
    elif path.is_file():
        yield _one_file(path, path.name, arg)
    else:
        yield Refused(arg, "not_found", "no such file or folder")


def _one_file(path: Path, key: str, source: str) -> Source | Refused:
    try:
        suffix = path.suffix.lower()
        if suffix not in MARKDOWN_SUFFIXES + HTML_SUFFIXES:
            raise Refusal("not_policy_text", "it is not HTML or Markdown (by its name)")
        limit = settings.POLICY_IMPORT_MAX_BYTES
        with path.open("rb") as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise Refusal("too_large", f"it is larger than {limit} bytes")
        text = _decoded(data)
        read = markdown_policy if suffix in MARKDOWN_SUFFIXES else html_policy
        return read(text, key, source)
    except Refusal as e:
        return Refused(source, e.code, e.why)
    except OSError as e:
        return Refused(source, "not_found", f"it could not be read ({e.strerror or e})")


# --- the shop's own ----------------------------------------------------------------------------------------


def from_shop(policy: ShopPolicy) -> Source | Refused:
    """A policy the shop serves itself (the port's `policies()`): its doc_id and scope are the desk's to give
    (derived from the shop's id), never what its text claims in front matter or a meta tag, so a shop's text
    takes over no other document and names no seller."""
    source = f"shop:{policy.id}"
    try:
        limit = settings.POLICY_IMPORT_MAX_BYTES
        if len(policy.body.encode()) > limit:
            raise Refusal("too_large", f"it is larger than {limit} bytes")
        read = html_policy if policy.html else markdown_policy
        item = read(policy.body, source, source)
    except Refusal as e:
        return Refused(source, e.code, e.why)
    title = " ".join(policy.title.split())[:200] or item.title
    return replace(item, doc_id=derived_doc_id(source), title=title, seller_code="", scope="")


# --- the web -----------------------------------------------------------------------------------------------


def from_url(url: str, client: httpx2.Client) -> Iterator[Source | Refused]:
    try:
        site = _host(url)  # the operator's site: everything this URL leads to stays on it
        final, content_type, data = fetch(url, client, site)
        path = urlsplit(final).path.lower()
        if content_type in XML_TYPES or path.endswith(".xml"):
            yield from _sitemap(url, final, data, client, site)
            return
        yield _page(url, content_type, path, data)
    except Refusal as e:
        yield Refused(url, e.code, e.why)


def _page(url: str, content_type: str, path: str, data: bytes) -> Source:
    text = _decoded(data)
    if content_type in HTML_TYPES:
        return html_policy(text, _url_key(url), url)
    if content_type in MARKDOWN_TYPES and path.endswith(MARKDOWN_SUFFIXES):
        return markdown_policy(text, _url_key(url), url)
    raise Refusal("not_policy_text", f"it is not HTML or Markdown (the server says {content_type or 'nothing'})")


def _sitemap(url: str, final: str, data: bytes, client: httpx2.Client, site: str, nested: bool = False
             ) -> Iterator[Source | Refused]:
    """The pages a sitemap names; a sitemap index's sitemaps in turn (one level deep, at most
    SITEMAPS_IN_INDEX). Only pages and sitemaps on `site`, the host of the URL the operator gave, are fetched."""
    # html.parser reads the XML as plain tags: no entities are expanded and nothing external is loaded.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)  # on purpose, for the reasons above
        soup = BeautifulSoup(_decoded(data), "html.parser")
    index = soup.find("sitemapindex") is not None
    if not index and soup.find("urlset") is None:
        yield Refused(url, "not_policy_text", "it is XML but not a sitemap (no <urlset> or <sitemapindex>)")
        return
    if index and nested:
        yield Refused(url, "not_policy_text", "a sitemap index inside a sitemap index is not followed")
        return
    most = SITEMAPS_IN_INDEX if index else SITEMAP_PAGES
    locations = [loc.get_text(strip=True) for loc in soup.find_all("loc")]
    for page in locations[:most]:
        page = urljoin(final, page)
        if _host(page) != site:  # a sitemap names pages of its own site only
            yield Refused(page, "fetch_failed", f"the sitemap's page is on another site than {site}")
            continue
        try:
            page_final, content_type, page_data = fetch(page, client, site)
            if index:
                yield from _sitemap(page, page_final, page_data, client, site, nested=True)
            else:
                yield _page(page, content_type, urlsplit(page_final).path.lower(), page_data)
        except Refusal as e:
            yield Refused(page, e.code, e.why)
    for page in locations[most:]:
        yield Refused(page, "too_large", f"the sitemap names more than {most} {'sitemaps' if index else 'pages'}")


def _url_key(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.lower()}{parts.path or '/'}" + (f"?{parts.query}" if parts.query else "")


def new_client() -> httpx2.Client:
    timeout = settings.POLICY_IMPORT_TIMEOUT_SECONDS
    return httpx2.Client(timeout=httpx2.Timeout(timeout), follow_redirects=False,
                         headers={"User-Agent": "agentsite-import-policies"})


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def _check_address(url: str) -> None:
    """Refused unless every address the URL's host is, or resolves to, is on the public internet (or the
    operator allowed their private network). Checked before each request, redirects included."""
    host = _host(url)
    if not host:
        raise Refusal("fetch_failed", "the address names no host")
    if settings.POLICY_IMPORT_PRIVATE_NETWORK:
        return
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, urlsplit(url).port or 443, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError):
        raise Refusal("fetch_failed", "its host name could not be resolved") from None
    for address in sorted(found):
        ip = ipaddress.ip_address(address.split("%")[0])
        ip = getattr(ip, "ipv4_mapped", None) or ip
        if not ip.is_global or ip.is_multicast:
            raise Refusal("fetch_failed", f"it is on a private or local network ({ip}; "
                                          "POLICY_IMPORT_PRIVATE_NETWORK is off)")
    if not found:
        raise Refusal("fetch_failed", "its host name could not be resolved")


def fetch(url: str, client: httpx2.Client, site: str = "") -> tuple[str, str, bytes]:
    """(the final URL, its content type, its body): http(s) only, on `site` (the URL's own host when not
    given), on a public address, redirects followed by hand so that each hop is checked, the body read in
    pieces and refused past POLICY_IMPORT_MAX_BYTES."""
    limit = settings.POLICY_IMPORT_MAX_BYTES
    site = site or _host(url)
    for _ in range(MAX_REDIRECTS + 1):
        if urlsplit(url).scheme not in ("http", "https"):
            raise Refusal("fetch_failed", "only http and https addresses are fetched")
        if _host(url) != site:
            raise Refusal("fetch_failed", f"it redirects to another site ({_host(url)})")
        _check_address(url)
        try:
            with client.stream("GET", url) as response:
                if response.is_redirect:
                    url = urljoin(url, response.headers.get("location", ""))
                    continue
                if response.status_code != 200:
                    raise Refusal("fetch_failed", f"the server answered {response.status_code}")
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > limit:
                    raise Refusal("too_large", f"it is larger than {limit} bytes")
                data = bytearray()
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > limit:
                        raise Refusal("too_large", f"it is larger than {limit} bytes")
                content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                return url, content_type, bytes(data)
        except httpx2.TimeoutException:
            raise Refusal("fetch_failed", "the server took too long to answer") from None
        except httpx2.HTTPError as e:
            raise Refusal("fetch_failed", f"it could not be fetched ({type(e).__name__})") from None
    raise Refusal("fetch_failed", f"more than {MAX_REDIRECTS} redirects")
