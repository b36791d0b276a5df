"""The stand-in's answers in German, when the desk tells it the customer's language is German.

A real model writes in the language it is told; the stand-in's flows write English sentences from templates, so
this module carries the German of the sentences customers meet most (where a parcel is, which order, the order
number, thanks, a refund asked for, an apology) and the words inside them (dates, "3 hours ago", "your time").
A sentence it does not know stays in English: the scripted model is a test double, not a translator.
"""

from __future__ import annotations

import re

# support/customers/languages.py model_line: "The customer's language is German (de). ..."
TOLD = re.compile(r"The customer's language is [^()\n]*\(de\)")

_DAYS = {"Mon": "Mo", "Tue": "Di", "Wed": "Mi", "Thu": "Do", "Fri": "Fr", "Sat": "Sa", "Sun": "So"}
_MONTHS = {"Jan": "Jan.", "Feb": "Feb.", "Mar": "März", "Apr": "Apr.", "May": "Mai", "Jun": "Juni", "Jul": "Juli",
           "Aug": "Aug.", "Sep": "Sept.", "Oct": "Okt.", "Nov": "Nov.", "Dec": "Dez."}
# facts.when(): "Wed 02 Dec at 14:00 your time" / "... UTC"
_WHEN = re.compile(r"\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun) (\d{2}) (" + "|".join(_MONTHS) + r") at (\d{2}:\d{2})"
                   r"( your time| UTC)")
# facts.ago()
_AGO_HOURS = re.compile(r"\b(\d+) hours? ago\b")
_AGO_DAYS = re.compile(r"\b(\d+) days ago \((\d+) hours\)")

_SENTENCES: list[tuple[re.Pattern, str]] = [
    (re.compile(r'Order (SU-\d+) is on its way with (.+?) \(tracking (\S+)\)\. The latest scan is "(.+?)"(?: at (.+?))? '
                r'on (.+?), (.+?)\.'),
     "Ihre Bestellung \\1 ist mit \\2 unterwegs (Sendungsnummer \\3). Der letzte Scan lautet „\\4“{at} am \\6, \\7."),
    (re.compile(r'(.+?) shows order (SU-\d+) as delivered: "(.+?)" on (.+?), (.+?)\.'),
     "Laut \\1 wurde die Bestellung \\2 zugestellt: „\\3“ am \\4, \\5."),
    (re.compile(r'I\'d be glad to help\. Could you send me your order number\? It starts with "SU-" and is in your '
                r'order confirmation email\.'),
     "Gern helfe ich Ihnen. Könnten Sie mir Ihre Bestellnummer schicken? Sie beginnt mit „SU-“ und steht in Ihrer "
     "Bestellbestätigung."),
    (re.compile(r'I\'d be glad to help\. Is it about (.+)\? If it\'s another order, send me its order number; it starts '
                r'with "SU-"\.'),
     "Gern helfe ich Ihnen. Geht es um \\1? Wenn es um eine andere Bestellung geht, schicken Sie mir bitte deren "
     "Bestellnummer; sie beginnt mit „SU-“."),
    (re.compile(r"You're welcome! If there's anything else about your order, just write here\."),
     "Gern geschehen! Wenn Sie noch etwas zu Ihrer Bestellung haben, schreiben Sie einfach hier."),
    (re.compile(r"I'm sorry, I couldn't finish checking your request(?: about order (SU-\d+))? just now\. A member of "
                r"our support team will follow up with you here\."),
     "Es tut mir leid, ich konnte Ihre Anfrage{about} gerade nicht fertig prüfen. Jemand aus unserem Support-Team "
     "meldet sich hier bei Ihnen."),
    (re.compile(r"I've asked our team to approve a refund of ([\d.]+) EUR\. A member of the team reviews every refund; "
                r"you'll see their decision here\."),
     "Ich habe unser Team gebeten, eine Erstattung von \\1 EUR zu genehmigen. Jede Erstattung prüft jemand aus "
     "unserem Team; die Entscheidung sehen Sie hier."),
    (re.compile(r" It should move again as soon as the carrier can get through\."),
     " Sie sollte weitergehen, sobald der Zustelldienst wieder durchkommt."),
    (re.compile(r" The parcel is held up by severe weather\."), " Das Paket wird durch schweres Unwetter aufgehalten."),
]
# Inside "Is it about SU-41501 (placed 2026-11-30, in transit) or ...": the desk's known-orders words.
_STATUS = {"placed, not shipped yet": "bestellt, noch nicht versandt", "shipped": "versandt",
           "in transit": "unterwegs", "delivered": "zugestellt", "cancelled": "storniert"}
_KNOWN = re.compile(r"\((placed|bestellt am) (\d{4}-\d{2}-\d{2}), ([^)]+)\)")


def told(system: str) -> bool:
    return bool(TOLD.search(system))


def translate(text: str | None) -> str | None:
    """`text` with the sentences this module knows in German."""
    if not text:
        return text
    for pattern, german in _SENTENCES:
        text = pattern.sub(lambda m, g=german: _fill(m, g), text)
    text = _KNOWN.sub(lambda m: f"(bestellt am {m.group(2)}, {_STATUS.get(m.group(3), m.group(3))})", text)
    text = text.replace(") or SU-", ") oder SU-")
    text = _WHEN.sub(lambda m: f"{_DAYS[m.group(1)]}, {int(m.group(2))}. {_MONTHS[m.group(3)]} um {m.group(4)}"
                               f"{' Ihre Ortszeit' if m.group(5) == ' your time' else ' UTC'}", text)
    text = _AGO_DAYS.sub(lambda m: f"vor {m.group(1)} Tagen ({m.group(2)} Stunden)", text)
    return _AGO_HOURS.sub(lambda m: f"vor {m.group(1)} Stunde{'n' if m.group(1) != '1' else ''}", text)


def _fill(match: re.Match, german: str) -> str:
    out = match.expand(german.replace("{at}", "").replace("{about}", ""))
    if "{at}" in german and match.group(5):
        out = out.replace(f"„{match.group(4)}“ am", f"„{match.group(4)}“ in {match.group(5)} am")
    if "{about}" in german and match.group(1):
        out = out.replace("Ihre Anfrage gerade", f"Ihre Anfrage zur Bestellung {match.group(1)} gerade")
    return out
