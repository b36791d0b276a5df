"""The wording check for what the desk sends to a third party (a marketplace seller): fixed rules in code, in
English and German, each with the reason a person reads on the approval card.

A message from customer support to a seller is about one order: what happened and what is needed. It never
needs to insult or swear, threaten, pressure, ask for money to be sent somewhere or for bank, card or login
details, move the conversation to a phone or a private channel, or tell the seller to ignore instructions or
to keep something from Sundry. Text like that is what a model that read hostile text writes, so a message
with any of it is not refused: it waits for a person, told why in plain words, e.g.
'the message contains an insult or swearing ("idiots")'.

The check runs on the text made plain, so spelling games do not slip past: compatibility forms folded
(full-width letters), invisible characters dropped, upper case folded (ß as ss), drawn-out letters shortened
("stuuupid"), letters spaced or dotted apart joined ("i d i o t", "f.u.c.k"), and digits or signs standing for
letters inside a word read as letters ("1d10t", "sh1t", "a$$hole"). Each rule's phrases are regular
expressions matched as whole words on that plain text (so "Scunthorpe" is a town and "class" is a class).

No model is asked: the same text always gets the same answer, at no cost, and the rules can be read here.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from support.tools.foreign_links import invisible_dropped

QUOTED_CHARS = 40  # of the words that broke a rule, shown with the reason


@dataclass(frozen=True)
class Rule:
    code: str  # stable, for logs and tests
    reason: str  # what a person reads: "the message contains a threat"
    phrases: tuple[str, ...]  # regular expressions over the plain text (lower case, ß as ss)
    # What else breaks the rule that a pattern alone cannot tell: found(plain text) -> what matched, or "".
    also: Callable[[str], str] | None = None

    def pattern(self) -> re.Pattern:
        return re.compile(r"(?<!\w)(?:" + "|".join(self.phrases) + r")(?!\w)")


@dataclass(frozen=True)
class Finding:
    code: str
    reason: str  # the rule's reason with what matched: 'the message contains a threat ("or else")'


# Whom a seller is asked to reach directly: the customer (whose channel to the seller is Sundry). "Write to
# us", "melden Sie sich bei uns" are how a seller answers support, and stay.
_PERSON = r"(?:the customer|the buyer|her|him|them)"
_KUNDE = r"(?:den kunden|dem kunden|die kundin|der kundin|den käufer|dem käufer|die käuferin|der käuferin)"

RULES = (
    Rule("insult", "the message contains an insult or swearing", (
        # English
        r"idiot(?:s|ic)?", r"moron(?:s|ic)?", r"imbeciles?", r"stupid(?:ity)?", r"dumb(?:ass(?:es)?)?",
        r"(?:dim|half|nit)wits?", r"retard(?:s|ed)?", r"incompetent", r"pathetic", r"clowns?", r"jerks?",
        r"losers?", r"liars?", r"crooks?", r"scammers?", r"fraudsters?", r"con ?artists?", r"thieving",
        r"bastards?", r"(?:ass|arse) ?holes?", r"asshats?", r"dick ?heads?", r"bitch(?:es|y)?", r"fuck\w*",
        r"motherf\w*", r"f[*#@$]+c?k\w*", r"wtf", r"stfu", r"shit\w*", r"bullshit", r"sh[*#@$]+t\w*",
        r"crap(?:py)?", r"(?:god ?)?damn(?:ed|it)?", r"piss(?:ed)? off", r"screw you", r"shut up",
        r"go to hell", r"what the hell", r"scum\w*", r"wankers?", r"twats?", r"pricks?", r"cunts?", r"tossers?",
        r"bollocks", r"numpty", r"pillocks?", r"you suck", r"(?:this|that) sucks",
        r"brain ?dead", r"shame on you",
        # German
        r"(?:voll)?idiot(?:en)?", r"trottel", r"depp(?:en)?", r"dummk(?:o|ö)pf(?:e)?", r"schwachk(?:o|ö)pf(?:e)?",
        r"bl(?:ö|oe)d(?:e|er|es|en|sinn|mann|männer)?", r"bescheuert\w*", r"d(?:ä|ae)mlich\w*",
        r"(?:sau|stroh)dumm\w*", r"arsch\w*", r"wichser", r"penner", r"versager", r"vollpfosten",
        r"spast(?:i|en)?", r"hurens(?:o|ö)hn(?:e)?", r"mistkerl", r"mistst(?:ü|ue)ck", r"scheiss\w*",
        r"verdammt\w*", r"drecks\w*", r"saftladen", r"sauladen", r"l(?:ü|ue)gner\w*", r"betr(?:ü|ue)ger\w*",
        r"abzocke\w*", r"gauner", r"halsabschneider", r"verarsch\w*", r"schwachsinn\w*", r"unversch(?:ä|ae)mt\w*",
        r"inkompetent\w*", r"unf(?:ä|ae)hig\w*", r"halt(?:et)? die klappe", r"halt(?:s|'s)? (?:das|dein|ihr)? ?maul",
        r"fahr(?:en sie)? zur h(?:ö|oe)lle", r"leck mich", r"zum kotzen", r"kotz\w*",
    )),
    Rule("threat", "the message contains a threat", (
        # English
        r"or else(?: ?[!.]| (?:we|i|you)(?:'ll| will)|$)",  # not "a replacement or else a refund"
        r"you(?:'ll| will) (?:regret|be sorry|pay for)", r"(?:we|i) know where you (?:live|are|work)",
        (r"(?:we|i)(?:'ll| will|'re going to| are going to|'m going to| am going to) (?:hurt|kill|destroy|ruin|"
        r"find|get|come for|sue|report) you"), r"(?:kill|hurt) you", r"burn (?:down )?your", r"hunt you down",
        r"watch your back", r"you(?:'ve| have) been warned",
        r"(?:ruin|destroy) your (?:business|shop|store|reputation|life|ratings?|reviews?)",
        r"(?:we|i)(?:'ll| will) (?:leave|post|write) (?:\w+ ){0,3}(?:bad|negative|1-star|one-star) reviews?",
        r"take you to court", r"(?:our|my) lawyers? will", r"(?:we|i)(?:'ll| will) sue",
        r"legal action against you", r"report you to the police",
        # German
        r"sonst (?:passiert|gibt es|gibt's|knallt|setzt es|kriegen sie|bekommen sie)",
        r"(?:das|es) wird (?:ihnen|dir|euch) leid ?tun", r"(?:es|das) (?:noch )?bereuen",
        r"(?:werden|wirst|werdet) (?:sie|du|ihr|es) (?:\w+ ){0,2}bereuen",
        r"wir wissen,? wo (?:sie|du|ihr) wohn\w*", r"umbringen",
        (r"(?:sie|dich|euch|ihren (?:laden|shop|ruf)|ihr (?:geschäft|geschaeft)) (?:ruinieren|zerst(?:ö|oe)ren|"
        r"fertig ?machen|kaputt ?machen|verklagen)"),
        r"pass(?:en sie)? (?:bloss|ja) auf", r"(?:sie|du) werden? schon sehen",
        r"rechtliche schritte gegen (?:sie|dich|euch)", r"anzeige gegen (?:sie|dich|euch)",
        r"das wird konsequenzen haben",
    )),
    Rule("payment", "the message asks for payment or bank details or for money to be sent somewhere", (
        # English
        r"iban", r"bic", r"swift(?: code)?", r"sort code", r"routing number", r"account (?:number|details)",
        r"bank (?:details|account|transfer|information|info)", r"wire (?:transfer|the money|the funds|it)",
        r"gift ?cards?", r"(?:itunes|google play|steam|amazon) (?:gift )?cards?", r"bitcoin", r"btc",
        r"crypto\w*", r"ethereum", r"usdt", r"wallet address", r"western union", r"moneygram", r"venmo", r"zelle",
        r"cash ?app", r"revolut", r"paypal\w*", r"card (?:number|details)", r"cvv", r"cvc",
        # "send the refund to the customer" is the order's business; to anyone or anything else it is not
        (r"(?:send|transfer|pay|wire) (?:the |a |this )?(?:refund|money|payment|funds|amount) (?:in)?to"
        r"(?! (?:the customer|the buyer|her|him|them)(?!\w))"),
        # German
        r"bankverbindung", r"bankdaten", r"konto(?:nummer|daten|verbindung|inhaber\w*)", r"bankleitzahl", r"blz",
        r"(?:über|ueber)weis\w*", r"(?:geschenk|gutschein|guthaben)karten?",
        r"(?:amazon|itunes|google[- ]play|steam)[- ]?(?:gutschein|karte)\w*", r"paysafe\w*", r"kartennummer",
        r"pr(?:ü|ue)fnummer", r"kryptow(?:ä|ae)hrung\w*",
    ), also=lambda text: _iban(text)),
    Rule("contact", "the message asks the seller to contact someone directly, away from Sundry", (
        # English
        rf"contact {_PERSON} (?:directly|at|on|via|through|by (?:phone|e-?mail|whatsapp|text))",
        rf"(?:call|phone|ring|text|sms|e-?mail|message|dm|write to) {_PERSON} (?:directly|at|on|via)",
        rf"reach {_PERSON} (?:directly|at|on|via)", rf"(?:get|be|keep) in touch with {_PERSON} (?:directly|at|on|via)",
        r"whats ?app", r"telegram", r"signal (?:me|us|app)", r"wechat",
        r"outside (?:the|this|sundry(?:'s)?) (?:platform|marketplace|site|app)", r"off[- ]platform",
        r"private (?:e-?mail|number|phone)",
        # German
        rf"(?:kontaktieren|rufen|schreiben|mailen) sie {_KUNDE} (?:direkt|unter|per|über|ueber)",
        rf"{_KUNDE} direkt (?:kontaktieren|anrufen|anschreiben|anmailen)",
        r"melden sie sich (?:direkt )?(?:beim kunden|bei dem kunden|bei der kundin)",
        rf"erreichen sie {_KUNDE} unter", r"ausserhalb (?:der plattform|von sundry|des marktplatzes)",
        r"private (?:e-?mail|nummer|handynummer|telefonnummer)",
    )),
    Rule("instructions", "the message tells the seller to ignore instructions or to keep something from Sundry", (
        # English
        (r"(?:ignore|disregard|override|bypass)(?: \w+){0,4}? (?:instructions?|rules?|polic(?:y|ies)|guidelines?|"
        r"prompts?|sundry|support|the platform|the marketplace|everything|anything|all)"),
        (r"do(?:n't| not) (?:tell|inform|let|involve|copy|cc) (?:sundry|support|customer support|anyone|anybody|"
        r"the customer|the platform|the marketplace)"),
        r"keep (?:this|it) (?:between us|secret|quiet|confidential|to yourself)",
        r"without (?:telling|informing|involving) (?:sundry|support|anyone|the customer|the platform)",
        r"(?:your|my) (?:new|real|actual) instructions?", r"system prompt", r"pretend (?:to be|you are)",
        r"(?:admin|administrator|developer|debug) mode",
        # German
        (r"(?:ignorier|missacht|überseh|ueberseh|übergeh|uebergeh)\w*(?: \w+){0,4}? (?:anweisung\w*|regeln?|"
        r"richtlinie\w*|vorgaben?|sundry|alles|alle)"),
        r"(?:sagen|erzählen|erzaehlen) sie (?:sundry|niemandem|keinem|dem kunden|der kundin)",
        r"unter uns", r"geheim ?halten", r"ohne (?:sundry|den kunden|die kundin|den support) zu informieren",
        r"neue anweisungen?",
    )),
    Rule("credentials", "the message asks for or gives login details (a password, a code)", (
        # English
        r"passwords?", r"passcodes?", r"pass ?phrases?", r"log ?-?in (?:details|credentials|data|information|code)",
        r"sign ?-?in (?:details|code)", r"credentials",
        r"(?:verification|confirmation|security|one-time|2fa|two-factor|authentication|auth|sms) codes?",
        r"otp", r"2fa", r"pin(?: code| number)?", r"api keys?", r"access tokens?", r"account (?:access|login)",
        # German
        r"passw(?:o|ö)rt\w*", r"kennw(?:o|ö)rt\w*", r"zugangsdaten", r"anmeldedaten", r"log-?in-?daten",
        r"(?:bestätigungs|bestaetigungs|verifizierungs|sicherheits|einmal|sms|auth)-?codes?",
        r"(?:m|push|photo|sms)-?tan", r"tan-?nummer", r"pin-?(?:code|nummer)",
    )),
    Rule("urgency", "the message pressures the seller with urgency", (
        # English
        r"urgent(?:ly)?", r"(?:immediately|right now|at once|straight away|right away) ?(?:!|or\b)",
        r"(?:must|have to|need to|needs to) (?:\w+ ){0,6}?(?:immediately|right now|at once)",
        r"act (?:now|fast|quickly)", r"final (?:warning|notice|reminder|demand)", r"last (?:chance|warning)",
        r"time is running out", r"before it'?s too late", r"no (?:more )?excuses",
        (r"(?:within|in|you have|you've got) (?:only |just |the next )?(?:\d+|one|two|five|ten|fifteen|thirty) "
        r"(?:minutes?|mins?)"),
        (r"(?:or|otherwise) (?:\w+ ){0,3}(?:account|shop|store|listings?) (?:will|would|is going to) (?:be )?"
        r"(?:suspended|closed|deleted|blocked|banned|terminated|removed)"),
        r"(?:account|listings?) (?:has been|have been|will be) (?:suspended|blocked|locked|closed|terminated)",
        # German
        r"dringend\w*", r"eilt", r"(?:sofort|umgehend|unverzüglich|unverzueglich|auf der stelle) ?(?:!|oder\b)",
        r"(?:müssen|muessen|muss|sollen) (?:sie )?(?:\w+ ){0,6}?(?:sofort|umgehend|unverzüglich|unverzueglich)",
        r"letzte (?:warnung|chance|mahnung|frist)",
        r"(?:innerhalb|binnen) (?:von )?(?:\d+|einer|zwei|fünf|zehn|dreissig) minuten",
        r"(?:konto|account|shop) wird (?:\w+ )?(?:gesperrt|gelöscht|geloescht|geschlossen)",
    )),
)
_PATTERNS = tuple((rule, rule.pattern()) for rule in RULES)

SHOUTING = "the message shouts"
SHOUT_LETTERS = 20  # a shorter text in capitals is a heading or an abbreviation, not shouting
SHOUT_SHARE = 0.6  # of its letters in capitals
SHOUT_WORDS = 4  # capitalised words in a row ("PLEASE SEND IT NOW"); "DHL", "EUR" or "SU" alone are not

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u00b4": "'", "`": "'"})
_DRAWN_OUT = re.compile(r"([^\W\d_])\1{2,}")
# Single letters with one separator between them, three or more: "i d i o t", "f.u.c.k", "s-h-i-t".
_SPACED = re.compile(r"(?<![^\W\d_])(?:[^\W\d_][ .\-_*]){2,}[^\W\d_](?![^\W\d_])")
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b", "@": "a", "$": "s",
                       "!": "i", "|": "l", "+": "t", "€": "e"})
_TOKEN = re.compile(r"[\w@$!|+€]+")
_SIGNS_ONLY = re.compile(r"(?:[^\W\d_]|[0134578@$!|+€])+")
_CAPS_WORD = r"\b[A-ZÄÖÜ]{2,}\b"
_CAPS_RUN = re.compile(rf"(?:{_CAPS_WORD}[ ,]+){{{SHOUT_WORDS - 1},}}{_CAPS_WORD}")
_EXCLAIM_ROW = re.compile(r"[!?]*![!?]*!")
_IBAN = re.compile(r"(?<![a-z0-9])[a-z]{2}\d{2}(?: ?[a-z0-9]{4}){2,7}(?: ?[a-z0-9]{1,4})?(?![a-z0-9])")


def findings(text: str) -> list[Finding]:
    """What in `text` breaks the rules, one finding per rule, in the rules' order; [] when nothing does."""
    text = str(text)
    plain = _plain(text)
    variants = (plain, _letters_for_signs(plain))
    found = []
    for rule, pattern in _PATTERNS:
        match = next((m.group(0) for m in map(pattern.search, variants) if m), "")
        if not match and rule.also is not None:
            match = rule.also(plain)
        if match:
            found.append(Finding(rule.code, f'{rule.reason} ("{match[:QUOTED_CHARS].strip()}")'))
    if shouted := _shouting(text):
        found.append(Finding("shouting", f"{SHOUTING} ({shouted})"))
    return found


def _plain(text: str) -> str:
    text = invisible_dropped(unicodedata.normalize("NFKC", text)).casefold().translate(_APOSTROPHES)
    text = _DRAWN_OUT.sub(r"\1", text)
    text = _SPACED.sub(lambda m: re.sub(r"[ .\-_*]", "", m.group(0)), text)
    return " ".join(text.split())


def _iban(text: str) -> str:
    """An IBAN in the text, spaced or not, told from a long tracking number by its check digits (ISO 13616:
    the number, its first four characters moved to the end and letters as 10-35, leaves 1 divided by 97)."""
    for match in _IBAN.finditer(text):
        compact = match.group(0).replace(" ", "").upper()
        digits = "".join(str(int(c, 36)) for c in compact[4:] + compact[:4])
        if int(digits) % 97 == 1:
            return match.group(0)
    return ""


def _letters_for_signs(text: str) -> str:
    """Digits and signs inside a word read as the letters they stand for ("1d10t" -> "idiot", "a$$hole"), in
    words of at least two letters and such signs only: "64.00", "DP55141402" (a 2) or "SU-41207" stay."""
    def read(match: re.Match) -> str:
        word = match.group(0)
        inner = word.rstrip("!")  # "idiot!" is "idiot" and an exclamation mark
        letters = sum(c.isalpha() for c in inner)
        if letters < 2 or letters == len(inner) or len(inner) > 15 or not _SIGNS_ONLY.fullmatch(inner):
            return word
        return inner.translate(_LEET) + word[len(inner):]
    return _TOKEN.sub(read, text)


def _shouting(text: str) -> str:
    """How the text shouts ("mostly capital letters", "PLEASE SEND IT NOW", "!!!"), "" when it does not."""
    text = unicodedata.normalize("NFKC", text)
    letters = [c for c in text if c.isalpha()]
    if len(letters) >= SHOUT_LETTERS and sum(c.isupper() for c in letters) >= SHOUT_SHARE * len(letters):
        return "mostly capital letters"
    if run := _CAPS_RUN.search(text):
        return f'"{run.group(0)[:QUOTED_CHARS].strip()}"'
    if row := _EXCLAIM_ROW.search(text):
        return f'"{row.group(0)[:QUOTED_CHARS]}"'
    return ""
