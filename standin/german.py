"""The stand-in's answers in German, when the desk tells it the customer's language is German.

A real model writes in the language it is told; the stand-in's flows write English sentences from templates, so
this module carries their German: where a parcel is, which order, the order number, thanks, every answer of the
missing-parcel scenario and the refund it ends in, and the words inside them (dates, "3 hours ago", "your time");
german_flows.py carries every other flow's. A reviewer's reason is quoted as the person wrote it, after „Unser Team
schreibt dazu:“. tests/test_standin_german.py plays every flow in German and fails on an English sentence left.
"""

from __future__ import annotations

import re

from .german_flows import MARKS, QUOTING, SENTENCES, WHO, who

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


def said(english: str, answer: str) -> bool:
    """Whether the stand-in's own earlier `answer` says `english` (one of german_flows.MARKS), in either language."""
    return english in answer or MARKS[english] in answer


def translate(text: str | None) -> str | None:
    """`text` with the sentences this module knows in German. What a person of our team wrote (a reason for a
    decision) is passed on word for word, quoted, after a note in German: nothing inside it is translated."""
    if not text:
        return text
    kept: list[str] = []

    def quote(words: str, note: bool = False) -> str:
        kept.append(_NOTE.format(words.strip()) if note else f"„{words.strip()}“")
        return _mark(len(kept) - 1)

    for pattern, german in _QUOTING + QUOTING:
        text = pattern.sub(lambda m, g=german: g(m, quote), text)
    text = _in_german(text)
    for i, words in enumerate(kept):
        text = text.replace(_mark(i), words)
    return text


def _in_german(text: str) -> str:
    for pattern, german in _SENTENCES + _MISSING_PARCEL + SENTENCES:
        text = pattern.sub(german if callable(german) else (lambda m, g=german: _fill(m, g)), text)
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


# -- what a person of our team wrote, quoted as written ----------------------------------------------------------
# standin/reply.py's declined_answer() and scenarios._disputed() put a reviewer's reason into the answer; in German
# the answer says whose words follow („Unser Team schreibt dazu: …“) and quotes them untouched.
_NOTE = "Unser Team schreibt dazu: „{}“"


def _mark(i: int) -> str:
    return chr(0xE000 + i)  # a private-use character: no pattern above matches it


def _asked(english: str) -> str:
    """reply.py's `asked`: "a refund of 64.00 EUR", "store credit of 5.00 EUR for order SU-1"."""
    refund = re.fullmatch(r"a refund of ([\d.]+) EUR", english)
    if refund:
        return f"eine Erstattung von {refund.group(1)} EUR"
    credit = re.fullmatch(r"store credit of ([\d.]+) EUR for order (SU-\d+)", english)
    return f"ein Guthaben von {credit.group(1)} EUR für die Bestellung {credit.group(2)}" if credit else english


_QUOTING = [
    (re.compile(r"I asked our team to approve (.+?), but they decided against it: (.+) I'm sorry this isn't the answer "
                r"you hoped for; if you have anything that might change the picture, just reply here\.", re.S),
     lambda m, quote: f"Ich habe unser Team gebeten, {_asked(m.group(1))} zu genehmigen, aber es hat sich dagegen "
                     f"entschieden. {quote(m.group(2), note=True)} Es tut mir leid, dass das nicht die Antwort "
                     "ist, die Sie sich erhofft haben; wenn Sie etwas haben, das daran etwas ändern könnte, antworten Sie "
                     "einfach hier."),
    (re.compile(r"Our team already reviewed a refund of ([\d.]+) EUR for order (SU-\d+) and decided against it: "
                r"(.+)\.(?= This is more than| I've asked for a specialist| I tried to pass this)", re.S),
     lambda m, quote: f"Unser Team hat eine Erstattung von {m.group(1)} EUR für die Bestellung {m.group(2)} bereits "
                     f"geprüft und sich dagegen entschieden. {quote(m.group(3) + '.', note=True)}"),
    (re.compile(r"I tried to pass this to a specialist, but that didn't go through \((.+)\)\. I'm sorry; please reply "
                r"here and we'll pick it up\.", re.S),
     lambda m, quote: f"Ich wollte das an eine Fachkraft unseres Teams weitergeben, aber das hat nicht geklappt. "
                     f"{quote(m.group(1) + '.', note=True)} Es tut mir leid; antworten Sie bitte hier, dann "
                     "kümmern wir uns darum."),
]


# -- the missing-parcel scenario and the refund it ends in ---------------------------------------------------------
def _refunded(m: re.Match) -> str:
    ref = f" (Erstattungsreferenz {m.group(2)})" if m.group(2) else ""
    return f"Ich habe Ihnen {m.group(1)} EUR auf Ihre ursprüngliche Zahlungsart erstattet{ref}."


_MISSING_PARCEL: list[tuple[re.Pattern, object]] = [
    (re.compile(r'(?:(?<=[.!?] )|^)([^.!?„“]+?) recorded your parcel for order (SU-\d+) as delivered: "(.+?)" on '
                r'(.+?), (.+?)\.'),
     "Laut \\1 wurde Ihr Paket zur Bestellung \\2 zugestellt: „\\3“ am \\4, \\5."),
    (re.compile(WHO + r" is that a missing-parcel claim can be opened (\d+) hours after the delivered scan, and (\d+) "
                       r"hours have passed(?:, within the (\d+)-day claim window)?\."),
     lambda m: f"{who(m.group(1))} besagt, dass eine Nachforschung zu einem fehlenden Paket {m.group(2)} Stunden nach "
               f"dem Zustell-Scan eröffnet werden kann, und {m.group(3)} Stunden sind vergangen"
               + (f", innerhalb der Frist von {m.group(4)} Tagen." if m.group(4) else ".")),
    (re.compile(r" That is within the (\d+)-day claim window\."),
     " Das liegt innerhalb der Frist von \\1 Tagen für eine Nachforschung."),
    (re.compile(WHO + r" is that a missing-parcel claim must be opened within (\d+) days of the delivery scan\. That "
                       r"scan was (\d+) days ago, so I'm sorry, but I can't open a claim or refund this order any more\."),
     lambda m: f"{who(m.group(1))} besagt, dass eine Nachforschung zu einem fehlenden Paket innerhalb von {m.group(2)} "
               f"Tagen nach dem Zustell-Scan eröffnet werden muss. Dieser Scan ist {m.group(3)} Tage her; es tut mir "
               "leid, aber ich kann für diese Bestellung keine Nachforschung mehr eröffnen und nichts mehr erstatten."),
    (re.compile(WHO + r" is that a missing-parcel claim can be opened once (\d+) hours have passed since the "
                       r"delivered scan, and it has been (\d+) hours so far\."),
     lambda m: f"{who(m.group(1))} besagt, dass eine Nachforschung zu einem fehlenden Paket eröffnet werden kann, "
               f"sobald seit dem Zustell-Scan {m.group(2)} Stunden vergangen sind; bisher sind es {m.group(3)} Stunden."),
    (re.compile(r" I've messaged (.+?) and asked them to open a claim with the carrier as soon as the (\d+) hours have "
                r"passed, in about (\d+) hours\."),
     " Ich habe \\1 geschrieben und darum gebeten, beim Zustelldienst eine Nachforschung zu eröffnen, sobald die "
     "\\2 Stunden vergangen sind, in etwa \\3 Stunden."),
    (re.compile(r" I couldn't reach (.+?) just now; our team will ask them to open the claim\."),
     " Ich konnte \\1 gerade nicht erreichen; unser Team bittet darum, die Nachforschung zu eröffnen."),
    (re.compile(r" If the parcel still hasn't turned up by then, the claim can go ahead and you can be refunded up to "
                r"([\d.]+) EUR\."),
     " Ist das Paket bis dahin nicht aufgetaucht, kann die Nachforschung beginnen, und Sie bekommen bis zu \\1 EUR "
     "erstattet."),
    (re.compile(r" The carrier hasn't marked it as delivered yet, so it is still on its way to you\."),
     " Der Zustelldienst hat es noch nicht als zugestellt erfasst, es ist also noch auf dem Weg zu Ihnen."),
    (re.compile(r" This order has already been refunded in full(?:, so there is nothing more to refund)?\."),
     " Diese Bestellung wurde bereits vollständig erstattet, es gibt also nichts mehr zu erstatten."),
    (re.compile(r"I asked our team to approve a refund of ([\d.]+) EUR; after reviewing it they approved ([\d.]+) EUR, "
                r"so (?=I've refunded)"),
     "Ich habe unser Team gebeten, eine Erstattung von \\1 EUR zu genehmigen; nach der Prüfung hat es \\2 EUR "
     "genehmigt. "),
    (re.compile(r"I've refunded ([\d.]+) EUR to your original payment method(?: \(refund reference (\S+?)\))?\."),
     _refunded),
    (re.compile(r" If you think the amount isn't right, just reply here and a member of our team will look at it "
                r"again\."),
     " Wenn Sie den Betrag für falsch halten, antworten Sie einfach hier, dann sieht sich jemand aus unserem Team "
     "das noch einmal an."),
    (re.compile(r"I asked our team to approve (.+?), but it couldn't be reviewed in time, so nothing has been "
                r"(refunded|added) yet\. A member of our team will follow up with you here\."),
     lambda m: f"Ich habe unser Team gebeten, {_asked(m.group(1))} zu genehmigen, aber das konnte nicht rechtzeitig "
               f"geprüft werden, daher wurde noch nichts {'erstattet' if m.group(2) == 'refunded' else 'gutgeschrieben'}. "
               "Jemand aus unserem Team meldet sich hier bei Ihnen."),
    (re.compile(r"This is more than I'm allowed to approve myself, so I've passed your request with all the details to "
                r"a specialist on our team\. They'll get back to you here\."),
     "Das ist mehr, als ich selbst genehmigen darf, deshalb habe ich Ihr Anliegen mit allen Einzelheiten an eine "
     "Fachkraft in unserem Team weitergegeben. Sie meldet sich hier bei Ihnen."),
    (re.compile(r"I've asked for a specialist on our team to take this over; they'll follow up with you here\."),
     "Ich habe eine Fachkraft in unserem Team gebeten, das zu übernehmen; sie meldet sich hier bei Ihnen."),
    (re.compile(r"I couldn't find an order (SU-\d+) on your account\. Could you check the number in your confirmation "
                r"email and send it again\? If the order was placed from another account, please write to us from "
                r"that account\."),
     "Ich konnte in Ihrem Konto keine Bestellung \\1 finden. Könnten Sie die Nummer in Ihrer Bestellbestätigung "
     "prüfen und sie noch einmal schicken? Wenn die Bestellung über ein anderes Konto aufgegeben wurde, schreiben Sie "
     "uns bitte von diesem Konto aus."),
    (re.compile(r"I couldn't get the carrier's tracking for order (SU-\d+) just now\. A member of our team will check "
                r"it and follow up here\."),
     "Ich konnte die Sendungsverfolgung des Zustelldienstes für die Bestellung \\1 gerade nicht abrufen. Jemand aus "
     "unserem Team prüft das und meldet sich hier."),
    (re.compile(r"I tried to issue the refund, but it didn't go through \((.+?)\)\. A member of our team will look "
                r"into it and follow up here\."),
     "Ich habe versucht, die Erstattung auszuführen, aber das hat nicht geklappt (\\1). Jemand aus unserem Team sieht "
     "sich das an und meldet sich hier."),
]
