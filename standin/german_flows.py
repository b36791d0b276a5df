"""The German of the stand-in's other answers: a damaged or wrong item, a status or a delay, a refund asked for,
store credit offered first, the warranty service's flows, a request not understood and a hand-over. Each entry is
one English sentence of standin/scenarios.py or standin/services.py and its German (formal "Sie"); german.py
applies them. Words of another system (the warranty service's lines) are quoted as it wrote them."""

from __future__ import annotations

import re

# "Our policy" / "Hearth & Loom's policy": whose rule a sentence states (scenarios._who).
WHO = r"(?:(?<=[.!?] )|^)(Our policy|[^.!?„“]+?'s? policy)"


def who(english: str) -> str:
    if english == "Our policy":
        return "Unsere Regel"
    return "Die Regel von " + re.sub(r"'s? policy$", "", english)


def _at(shop: str) -> str:
    """t.shop ("Hearth & Loom " or "") as German words after "Bestellung(en)"."""
    return f" bei {shop.strip()}" if shop.strip() else ""


def _ordered(m: re.Match) -> str:
    left = (f", davon wurden bereits {m.group(3)} EUR erstattet; {m.group(4)} EUR können noch erstattet werden."
            if m.group(3) else ".")
    return f"Die Bestellung {m.group(1)} kostete {m.group(2)} EUR{left}"


def _placed(m: re.Match) -> str:
    state = {"has been placed and hasn't shipped yet": "wurde aufgegeben und ist noch nicht versandt",
             "was cancelled": "wurde storniert"}.get(m.group(2))
    if state is None:
        state = f"ist als „{m.group(3)}“ vermerkt und hat noch keine Sendungsnummer"
    return f"Ihre Bestellung {m.group(1)} {state}. Wenn Sie noch etwas dazu brauchen, bin ich hier."


def _credited(m: re.Match) -> str:
    ref = f" (Referenz {m.group(3)})" if m.group(3) else ""
    return (f"Unser Team hat zugestimmt: Ein Guthaben von {m.group(1)} EUR wurde für die Bestellung {m.group(2)} "
            f"gutgeschrieben{ref}. Sie können es bei Ihrer nächsten Bestellung{_at(m.group(4))} einlösen.")


SENTENCES: list[tuple[re.Pattern, object]] = [
    # -- a request not understood, a hand-over, a loop stopped, a benchmark run ----------------------------------
    (re.compile(r"I'm sorry, I'm not sure I understood what you need\."),
     "Es tut mir leid, ich bin nicht sicher, ob ich Ihr Anliegen richtig verstanden habe."),
    (re.compile(r"I can help with your (.*?)orders: where a parcel is, a parcel marked delivered that never arrived, "
                r"an item that arrived damaged or isn't what you ordered, and refunds\."),
     lambda m: f"Ich kann Ihnen bei Ihren Bestellungen{_at(m.group(1))} helfen: wo ein Paket ist, ein als zugestellt "
               "gemeldetes Paket, das nie angekommen ist, ein Artikel, der beschädigt angekommen ist oder nicht der "
               "bestellte ist, und Erstattungen."),
    (re.compile(r" Is your question about order (SU-\d+), or another one\?"),
     " Geht es um die Bestellung \\1 oder um eine andere?"),
    (re.compile(r' Which order is it about\? Please send me the order number; it starts with "SU-" and is in your '
                r'order confirmation email\.'),
     " Um welche Bestellung geht es? Bitte schicken Sie mir die Bestellnummer; sie beginnt mit „SU-“ und steht in "
     "Ihrer Bestellbestätigung."),
    (re.compile(r" If it's about something else, tell me and I'll pass it to a member of our team\."),
     " Wenn es um etwas anderes geht, sagen Sie es mir, dann gebe ich es an jemanden aus unserem Team weiter."),
    (re.compile(r"I've passed your question to a member of our team, who will reply here\."),
     "Ich habe Ihre Frage an jemanden aus unserem Team weitergegeben, der Ihnen hier antwortet."),
    (re.compile(r"I'm sorry, I couldn't pass your question to a member of our team just now\. Please write to us "
                r"again later, or tell me which order your question is about\."),
     "Es tut mir leid, ich konnte Ihre Frage gerade nicht an unser Team weitergeben. Bitte schreiben Sie uns später "
     "noch einmal, oder sagen Sie mir, um welche Bestellung es geht."),
    (re.compile(r"I'm sorry: I keep getting the same result when I check this, so rather than go round in circles "
                r"I'll stop here\. A member of our support team can pick this up from what I've found\."),
     "Es tut mir leid: Ich bekomme bei der Prüfung immer wieder dasselbe Ergebnis; statt mich im Kreis zu drehen, "
     "höre ich hier auf. Jemand aus unserem Support-Team kann mit meinen bisherigen Ergebnissen weitermachen."),
    (re.compile(r"I checked our policies (\d+) times\. Everything is in order\."),
     "Ich habe unsere Richtlinien \\1-mal geprüft. Alles ist in Ordnung."),
    # -- a status, a delay, a refund asked for ---------------------------------------------------------------------
    (re.compile(r'Your order (SU-\d+) (has been placed and hasn\'t shipped yet|was cancelled|is marked "(.*?)" and '
                r'has no tracking yet)\. I\'ll be here if you need anything else about it\.'), _placed),
    (re.compile(WHO + r" is that when weather delays a parcel by more than (\d+) days, the shipping fee is "
                      r"refunded\."),
     lambda m: f"{who(m.group(1))} besagt, dass die Versandkosten erstattet werden, wenn Unwetter ein Paket um mehr "
               f"als {m.group(2)} Tage verzögert."),
    (re.compile(r" As it's still on its way, there's nothing to refund at this point; if it doesn't arrive, write to "
                r"us here and we'll sort it out\."),
     " Da sie noch unterwegs ist, gibt es im Moment nichts zu erstatten; sollte sie nicht ankommen, schreiben Sie "
     "uns hier, dann kümmern wir uns darum."),
    (re.compile(r"Order (SU-\d+) came to ([\d.]+) EUR(?: and ([\d.]+) EUR has already been refunded, so ([\d.]+) EUR "
                r"is left to refund)?\."), _ordered),
    (re.compile(r" It has already been refunded in full, so there is nothing more I can refund\."),
     " Sie wurde bereits vollständig erstattet, ich kann also nichts mehr erstatten."),
    (re.compile(r" Before a refund, we can offer you store credit of ([\d.]+) EUR instead, to spend on anything in "
                r"our shop\. Would you like the store credit, or do you still prefer a refund\?"),
     " Vor einer Erstattung können wir Ihnen stattdessen ein Guthaben von \\1 EUR anbieten, das Sie für alles in "
     "unserem Shop verwenden können. Möchten Sie das Guthaben, oder ist Ihnen eine Erstattung lieber?"),
    # -- a damaged item --------------------------------------------------------------------------------------------
    (re.compile(r"I'm sorry that your (.+?) from order (SU-\d+) arrived damaged\."),
     "Es tut mir leid, dass Ihre Lieferung aus der Bestellung \\2 („\\1“) beschädigt angekommen ist."),
    (re.compile(r" Thank you for the photo\."), " Danke für das Foto."),
    (re.compile(WHO + r" asks for damage to be reported within (\d+) days of delivery, and it was delivered (.+?)"
                      r"(, so you're within it\.|, so this is outside the reporting window and I can't refund it\. "
                      r"I'm sorry\.)"),
     lambda m: f"{who(m.group(1))} verlangt, dass Schäden innerhalb von {m.group(2)} Tagen nach der Zustellung "
               f"gemeldet werden, und die Zustellung war {m.group(3)}"
               + ("; Sie sind also innerhalb der Frist." if "within it" in m.group(4) else
                  "; das liegt außerhalb der Meldefrist, daher kann ich nichts erstatten. Es tut mir leid.")),
    (re.compile(r" Our damage policy asks for a photo before a refund: please attach one of the damaged item \(and of "
                r"the packaging, if you still have it\) with the paperclip button next to the message box, and I'll "
                r"take it from there\."),
     " Unsere Regel für beschädigte Artikel verlangt vor einer Erstattung ein Foto: Bitte hängen Sie eines des "
     "beschädigten Artikels (und der Verpackung, falls Sie sie noch haben) mit der Büroklammer-Schaltfläche neben "
     "dem Nachrichtenfeld an, dann kümmere ich mich um alles Weitere."),
    # -- a wrong item ----------------------------------------------------------------------------------------------
    (re.compile(r"I'm sorry you received the wrong item for order (SU-\d+)\. Under our wrong-item policy the seller "
                r"sends you a return label, then a replacement or a refund\."),
     "Es tut mir leid, dass Sie zur Bestellung \\1 einen falschen Artikel erhalten haben. Nach unserer Regel für "
     "falsche Artikel schickt Ihnen der Verkäufer ein Rücksendeetikett, danach einen Ersatz oder eine Erstattung."),
    (re.compile(r" I couldn't reach (.+?) just now; our team will follow up with them\."),
     " Ich konnte \\1 gerade nicht erreichen; unser Team kümmert sich darum."),
    (re.compile(r" I've asked (.+?) to send you a return label for the item you received; once it's on its way back "
                r"they'll send the right one or refund you\."),
     " Ich habe \\1 gebeten, Ihnen ein Rücksendeetikett für den erhaltenen Artikel zu schicken; sobald er auf dem "
     "Rückweg ist, bekommen Sie den richtigen Artikel oder eine Erstattung."),
    # -- store credit (the warranty service's tools) --------------------------------------------------------------
    (re.compile(r"I've asked our team to approve store credit of ([\d.]+) EUR for order (SU-\d+)\. A member of the "
                r"team reviews every request like this; you'll see their decision here\."),
     "Ich habe unser Team gebeten, ein Guthaben von \\1 EUR für die Bestellung \\2 zu genehmigen. Jede solche "
     "Anfrage prüft jemand aus unserem Team; die Entscheidung sehen Sie hier."),
    (re.compile(r"I couldn't reach our warranty service to (?:look up|check) the warranty for order (SU-\d+) just "
                r"now\. A member of our team will check and follow up with you here\."),
     "Ich konnte unseren Garantieservice gerade nicht erreichen, um die Garantie für die Bestellung \\1 zu prüfen. "
     "Jemand aus unserem Team prüft das und meldet sich hier bei Ihnen."),
    (re.compile(r"Order (SU-\d+) has already been refunded in full, so there is nothing left to give as store "
                r"credit\."),
     "Die Bestellung \\1 wurde bereits vollständig erstattet, es bleibt also nichts, das als Guthaben gegeben werden "
     "könnte."),
    (re.compile(r"Our team approved it: store credit of ([\d.]+) EUR has been added for order (SU-\d+)"
                r"(?: \(reference (\S+?)\))?\. You can spend it on your next (.*?)order\."), _credited),
    (re.compile(r"I asked for store credit of ([\d.]+) EUR for order (SU-\d+), but I couldn't confirm that it went "
                r"through\. A member of our team will check with the warranty service and let you know here; there's "
                r"no need to ask again\."),
     "Ich habe ein Guthaben von \\1 EUR für die Bestellung \\2 angefordert, konnte aber nicht bestätigen, dass es "
     "gebucht wurde. Jemand aus unserem Team klärt das mit dem Garantieservice und gibt Ihnen hier Bescheid; Sie "
     "müssen nicht noch einmal fragen."),
    (re.compile(r"I tried to add store credit of ([\d.]+) EUR for order (SU-\d+), but it didn't go through\. A member "
                r"of our team will look into it and follow up here\."),
     "Ich habe versucht, ein Guthaben von \\1 EUR für die Bestellung \\2 gutzuschreiben, aber das hat nicht geklappt. "
     "Jemand aus unserem Team sieht sich das an und meldet sich hier."),
]

# What another system or a person wrote, quoted untouched: (pattern, german(match, quote)); `quote(words)` is the
# words as written in „…“, `quote(words, note=True)` after „Unser Team schreibt dazu:“.
_CHECKED = "Ich habe bei unserem Garantieservice nachgefragt. Zur Bestellung {} heißt es dort: {}."
QUOTING = [
    (re.compile(r" Our team's note: (.+?)(?= If you think the amount isn't right)", re.S),
     lambda m, quote: " " + quote(m.group(1), note=True)),
    (re.compile(r"I checked with our warranty service: for order (SU-\d+), (.+), so I can't offer store credit for "
                r"it\. I'm sorry; if something else is wrong with the order, tell me and I'll see what I can do\.",
                re.S),
     lambda m, quote: _CHECKED.format(m.group(1), quote(m.group(2))) + " Daher kann ich dafür kein Guthaben anbieten. "
     "Es tut mir leid; wenn mit der Bestellung etwas anderes nicht stimmt, sagen Sie es mir, dann sehe ich, was ich "
     "tun kann."),
    (re.compile(r"I checked with our warranty service: for order (SU-\d+), (.+)\. I'm sorry; if something is wrong "
                r"with the order, tell me what happened and I'll see what else I can do\.", re.S),
     lambda m, quote: _CHECKED.format(m.group(1), quote(m.group(2))) + " Es tut mir leid; wenn mit der Bestellung "
     "etwas nicht stimmt, schildern Sie mir, was passiert ist, dann sehe ich, was ich sonst tun kann."),
    (re.compile(r"I checked with our warranty service\. For order (SU-\d+): (.+)\. If something stops working while "
                r"it is covered, write to us here and we'll sort it out\.", re.S),
     lambda m, quote: _CHECKED.format(m.group(1), quote(m.group(2))) + " Wenn etwas nicht mehr funktioniert, solange "
     "die Garantie gilt, schreiben Sie uns hier, dann kümmern wir uns darum."),
]

# The words the stand-in looks for in its own previous answer (scenarios.py), in German.
MARKS = {"order number": "Bestellnummer",
         "I'm sorry, I'm not sure I understood what you need.": "Es tut mir leid, ich bin nicht sicher, ob ich Ihr "
                                                                "Anliegen richtig verstanden habe.",
         "Before a refund, we can offer you store credit": "Vor einer Erstattung können wir Ihnen stattdessen ein "
                                                           "Guthaben"}
