"""What customers see of the shop: its name, the agent's, the e-mails' sender and footer, the widget's look and
hours. All of it is read from the live agent profile (support.profiles.live) when it is shown; no shop is named
in code.

Names a lead writes are shown as written, in every language. The demo's built-in agent name is one the desk's
catalogues know, so it reads as German in a German conversation ("der Assistent von Sundry").
"""

from __future__ import annotations

from email.utils import formataddr, parseaddr
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import translation
from django.utils.text import capfirst
from django.utils.translation import gettext, gettext_noop

from support.customers import languages
from support.profiles import selectors

BUILT_IN_AGENT_NAMES = (gettext_noop("Sundry's assistant"),)  # the demo's: translated by the catalogues
HEX_COLOUR = frozenset("0123456789abcdefABCDEF")
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # the widget's data-hours spells days so


def shop_name() -> str:
    return selectors.live().shop_name


def agent_name() -> str:
    """The agent's name in the active language, as it reads inside a sentence ("I'm der Assistent …")."""
    name = selectors.live().agent_name
    return gettext(name) if name in BUILT_IN_AGENT_NAMES else name


def agent_label() -> str:
    """The agent's name as a label on its own (above a reply, in an e-mail): its first letter a capital."""
    return capfirst(agent_name())


def sender() -> str:
    """The From line of e-mails to customers: the profile's sender name, at the operator's address."""
    address = parseaddr(settings.DEFAULT_FROM_EMAIL)[1] or settings.DEFAULT_FROM_EMAIL
    name = selectors.live().email_sender_name.strip()
    return formataddr((name, address)) if name else address


def email_context() -> dict:
    """What every e-mail to a customer names: the shop, the sender and the footer the lead wrote (plain text)."""
    profile = selectors.live()
    return {"shop": profile.shop_name, "sender_name": profile.email_sender_name.strip(),
            "footer": profile.email_footer.strip()}


def page_context() -> dict:
    """What a customer page (a conversation link, unsubscribing) names in its header and title."""
    name = shop_name()
    return {"shop": name, "shop_initial": name.strip()[:1].upper()}


def widget_face() -> dict:
    """What the widget reads when it starts (GET /api/widget, docs/widget.md): every value checked here, so a
    lead's typo reaches no page as CSS or as a script's address. Agent names per language the desk speaks."""
    profile = selectors.live()
    look = profile.appearance
    names = {}
    for code in languages.supported():
        with translation.override(code):
            names[code] = agent_name()
    hours = hours_text(profile.opening_hours)
    setting_up = selectors.being_set_up()
    return {
        # No name until the shop has one: the widget then says "Customer support" in its own words.
        "shop_name": "" if setting_up else profile.shop_name,
        "agent_name": names,
        "languages": languages.offered(),
        "colour": look.colour if _is_colour(look.colour) else None,
        "greeting": look.greeting.strip(),
        "launcher_label": look.launcher_label.strip(),
        "logo_url": look.logo_url if _is_logo_url(look.logo_url) else None,
        "hours": hours,
        "hours_zone": profile.time_zone if hours else None,
        # A shop's own desk before its first publish: the widget says support is being set up and takes no
        # message (the desk refuses one too: desk.services.setup_check).
        "setting_up": setting_up,
    }


def hours_text(opening_hours: dict) -> str:
    """{0: "09:00-17:00", …, 4: "09:00-17:00", 5: "10:00-14:00"} -> "Mon-Fri 09:00-17:00, Sat 10:00-14:00":
    the days with the same hours in a row as one range; closed days ("" or missing) left out."""
    runs: list[list] = []  # [first day, last day, hours]
    for day in range(7):
        hours = str(opening_hours.get(day) or "").strip()
        if runs and hours and runs[-1][2] == hours and runs[-1][1] == day - 1:
            runs[-1][1] = day
        elif hours:
            runs.append([day, day, hours])
    return ", ".join((DAYS[a] if a == b else f"{DAYS[a]}-{DAYS[b]}") + f" {hours}" for a, b, hours in runs)


def colour_ok(value: str) -> bool:
    """Whether the widget would show this colour (the console's editor tells the lead before saving)."""
    return _is_colour(value)


def logo_url_ok(value: str) -> bool:
    """Whether the widget would load a logo from this address."""
    return _is_logo_url(value)


def _is_colour(value: str) -> bool:
    return (isinstance(value, str) and value.startswith("#") and len(value) in (4, 7)
            and all(c in HEX_COLOUR for c in value[1:]))


def _is_logo_url(value: str) -> bool:
    """https anywhere, or a path on the desk ("/static/…"); never a data:, javascript: or protocol-relative URL."""
    if not isinstance(value, str) or not value or len(value) > 500:
        return False
    if value.startswith("/") and not value.startswith("//"):
        return True
    parts = urlsplit(value)
    return parts.scheme == "https" and bool(parts.hostname) and not parts.username and not parts.password
