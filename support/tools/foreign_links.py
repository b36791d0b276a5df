"""Which sites a text points its reader to besides the shop's own: for what leaves the desk for a third party.

A link is anything a reader could follow or type into a browser:
- an address with a scheme (https://…, ftp://…), also written to slip past a filter: hxxp, h**p, "https[:]//",
  a backslash for a slash, no colon ("https//");
- a name on a real top-level domain ("evil.com", "evil.co.uk/login", the domain of an e-mail address), known
  from the Public Suffix List, or on a reserved one (.example, .test, .localhost, …);
- a name of any kind followed by a path or a port ("evil.zzz/login"), and an IPv4 address;
- those names with their dots disguised: "evil dot com", "evil[.]com", "evil(dot)com", "evil . com",
  full-width or ideographic dots, invisible characters between the letters;
- names written with letters of another alphabet (IDN, or punycode "xn--"): shown both ways to the person.

The host of an address with a scheme is what a browser would open: in https://sundry.example@evil.example/
the shop's name is only the user part, and evil.example the site. Every name found in the text is checked,
the user part's too, so a disguise of either kind is named.

The shop's own hosts are those of WIDGET_ALLOWED_ORIGINS (the shop pages that embed the widget), each with or
without "www."; a name ending in one of them is still another site (sundry.example.evil.example).
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from urllib.parse import unquote, urlsplit

from django.conf import settings
from publicsuffixlist import PublicSuffixList

# Top-level names no registry hands out (RFC 2606, 6761, 6762, 7686) that still lead somewhere in a test,
# an intranet or Tor.
RESERVED_TLDS = {"example", "test", "invalid", "localhost", "local", "onion", "internal", "lan", "home", "corp"}

_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e"
                        "\u2060-\u2064\u206a-\u206f\u3164\ufeff\uffa0]")
# Full stops of other scripts that browsers take as the dot of a host name (NFKC already folds the full-width
# and small ones). Middle dots and bullets are not among them: they separate words in ordinary text.
_ODD_DOTS = str.maketrans({"\u3002": ".", "\uff61": ".", "\u2e3c": "."})
# "evil[.]com", "evil (dot) com", "evil{punkt}com": a dot in brackets is always a disguised dot.
_BRACKETED_DOT = re.compile(r"\s*[\[({<]\s*(?:\.|dot|punkt)\s*[\])}>]\s*", re.IGNORECASE)
# "evil dot com", "evil . com": a dot spelled out or set apart between two words. Only a real top-level name
# after it makes a link, so "polka dot dress" stays a dress.
_SPELLED_DOT = re.compile(r"(?<=[^\W_])\s+(?:dot|punkt|\.)\s+(?=[^\W_])", re.IGNORECASE)
# hxxp://, h**ps://, https[:]//, http:\\, https// and the like, made a plain scheme.
_DISGUISED_SCHEME = re.compile(r"\bh[tx*]{2}p(s?)\s*(?:\[:\]|\(:\)|:)?\s*(?:[/\\]\s*){2,3}", re.IGNORECASE)
_URL = re.compile(r"\b([a-z][a-z0-9+.-]{1,15})://([^\s<>\"'`]+)", re.IGNORECASE)
# Dot-separated labels of letters, digits and hyphens, any alphabet; what follows tells a path or a port.
# A name starts where a word starts (so a long word costs one pass, not one per letter).
_NAME = re.compile(r"(?<![\w-])(?:[^\W_][\w-]*\.)+[^\W_][\w-]*(?P<after>/[^\s/]|:\d)?")
_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")


def shop_hosts() -> set[str]:
    """The shop's own host names, in the form _ascii gives: read on every call, so a changed setting counts."""
    hosts = set()
    for origin in settings.WIDGET_ALLOWED_ORIGINS:
        host = urlsplit(origin).hostname
        if host:
            hosts.add(_without_www(_ascii(host)))
    return hosts


def foreign_hosts(text: str, own: set[str] | None = None) -> list[str]:
    """The sites `text` links to other than `own` (default: the shop's hosts), each once, as a person should
    read them ("evil.example", "xn--undry-g2e.example (ѕundry.example)"), in the order they appear."""
    own = shop_hosts() if own is None else {_without_www(_ascii(h)) for h in own}
    found: dict[str, str] = {}
    for _, host in sorted(_hosts(_plain(str(text)))):  # in the order they appear
        ascii_host = _ascii(host)
        if _without_www(ascii_host) in own or ascii_host in found:
            continue
        readable = _readable(ascii_host)
        found[ascii_host] = ascii_host if readable == ascii_host else f"{ascii_host} ({readable})"
    return list(found.values())


def invisible_dropped(text: str) -> str:
    """The text without the characters that show as nothing (zero-width spaces and joiners, soft hyphens,
    direction marks) that a filter-dodger puts inside a word."""
    return _INVISIBLE.sub("", text)


def _plain(text: str) -> str:
    """The text as a browser's address bar would take it: compatibility forms folded (full-width letters and
    dots), invisible characters dropped, percent-escapes decoded, disguised dots and schemes written plainly,
    backslashes as slashes."""
    text = unicodedata.normalize("NFKC", text).translate(_ODD_DOTS)
    text = unquote(invisible_dropped(text))  # "%65vil.example" is evil.example to a browser
    text = _BRACKETED_DOT.sub(".", text)
    text = _SPELLED_DOT.sub(".", text)
    text = _DISGUISED_SCHEME.sub(lambda m: f"http{m.group(1).lower()}://", text)
    return text.replace("\\", "/")


def _hosts(text: str):
    """(where, host) for every host name or address in the text: those of addresses with a scheme (whatever
    they look like), and every name that is a link by itself."""
    for match in _URL.finditer(text):
        host = _url_host(match.group(0))
        if host:
            yield match.start(), host
    for match in _NAME.finditer(text):
        name = match.group(0)[:match.start("after") - match.start()] if match.group("after") else match.group(0)
        name = name.casefold().strip("-")
        if _is_link(name, followed_by_path=bool(match.group("after"))):
            yield match.start(), name


def _url_host(url: str) -> str:
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:  # a malformed IPv6 literal: name what stands where the host would be
        host = url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]
    return unquote(host).casefold().strip(".")


def _is_link(name: str, *, followed_by_path: bool) -> bool:
    labels = name.split(".")
    if _IPV4.match(name):
        return all(int(label) <= 255 for label in labels)
    tld = labels[-1]
    if not tld.startswith("xn--") and not (len(tld) > 1 and tld.isalpha()):
        return False  # an amount, a date, a version, a measurement ("3.5kg"), an abbreviation ("e.g")
    if followed_by_path or tld in RESERVED_TLDS:
        return True
    return _public_suffixes().publicsuffix(_ascii(name), accept_unknown=False) is not None


@cache
def _public_suffixes() -> PublicSuffixList:
    # The list the package ships, read once (about 50 ms); never fetched at run time.
    return PublicSuffixList(only_icann=True)


def _ascii(host: str) -> str:
    """A host as DNS knows it: each label in punycode where it has other letters, lower case."""
    labels = []
    for label in host.casefold().strip(".").split("."):
        try:
            labels.append(label.encode("idna").decode("ascii") if not label.isascii() else label)
        except UnicodeError:  # not a name IDNA can encode: keep it as written, it matches nothing of ours
            labels.append(label)
    return ".".join(labels)


def _readable(host: str) -> str:
    """A punycode host in the letters it stands for ("xn--undry-g2e.example" -> "ѕundry.example")."""
    labels = []
    for label in host.split("."):
        try:
            labels.append(label.encode("ascii").decode("idna") if label.startswith("xn--") else label)
        except UnicodeError:
            labels.append(label)
    return ".".join(labels)


def _without_www(host: str) -> str:
    return host.removeprefix("www.")
