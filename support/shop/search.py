"""BM25 ranking of the policy documents, done in Python: the corpus is a handful of rows, and the
same code gives the same ranking on SQLite and PostgreSQL. The core (tokenise, rank, best_passage)
needs no database; search_policies() feeds it PolicyDocument rows.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from django.db.models import Q
from django.db.models.signals import post_delete, post_save

from support.models import PolicyDocument

K1 = 1.5
B = 0.75
TITLE_WEIGHT = 2  # a title says what a document is about: its words count twice
EXCERPT_CHARS = 600

STOP_WORDS = frozenset(
    """a about after again all also am an and any are as at be been before being but by can could did do
    does doing for from had has have having he her here hers him his how i if in into is it its itself
    just me my no nor not of off on once only or other our ours out over own same she should so some
    such than that the their theirs them then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours""".split()
)

_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def stem(word: str) -> str:
    """Light suffix stripping so that parcels/parcel and delivered/delivery/deliveries meet."""
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            # shipped -> shipp -> ship; but keep "fall", "miss"
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]
            break
    if len(word) > 4 and word.endswith("ery"):
        word = word[:-1]  # delivery -> deliver
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]  # damage/damaged, receive/received
    return word


def tokenise(text: str) -> list[str]:
    return list(_terms(text))


@lru_cache(maxsize=8192)
def _terms(text: str) -> tuple[str, ...]:
    """Tokenised once per distinct text: the documents (and their sentences) are the same search after
    search; a query is new. Keyed by the text itself, so an edited document is simply a new key."""
    return tuple(stem(w) for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in STOP_WORDS)


@dataclass(frozen=True)
class Doc:
    doc_id: str
    title: str
    body: str


@dataclass(frozen=True)
class Hit:
    doc: Doc
    score: float
    excerpt: str


def idf_table(docs: list[Doc]) -> dict[str, float]:
    """BM25's idf (the +1 form, never negative) for every term of the corpus."""
    return dict(_idf(tuple(docs)))


@lru_cache(maxsize=64)
def _idf(docs: tuple[Doc, ...]) -> tuple[tuple[str, float], ...]:
    df: Counter[str] = Counter()
    for doc in docs:
        df.update(set(_terms(doc.title)) | set(_terms(doc.body)))
    n = len(docs)
    return tuple((term, math.log(1 + (n - count + 0.5) / (count + 0.5))) for term, count in df.items())


@lru_cache(maxsize=1024)
def _bag(title: str, body: str) -> tuple[Counter, int]:
    """A document's term counts (its title's words count TITLE_WEIGHT times) and its length."""
    bag = Counter(_terms(title) * TITLE_WEIGHT + _terms(body))
    return bag, sum(bag.values())


def rank(query: str, docs: list[Doc], limit: int = 4) -> list[Hit]:
    """The best `limit` documents for the query, best first; documents sharing no term are left out."""
    terms = set(tokenise(query))
    if not terms or not docs:
        return []
    idf = idf_table(docs)
    bags = [_bag(d.title, d.body) for d in docs]
    avg_len = sum(length for _, length in bags) / len(bags) or 1.0
    scored = []
    for doc, (bag, length) in zip(docs, bags):
        score = 0.0
        for term in terms:
            tf = bag.get(term, 0)
            if tf:
                score += idf[term] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg_len))
        if score > 0:
            scored.append((score, doc))
    # Ties broken by doc_id so the order never depends on the database's row order.
    scored.sort(key=lambda pair: (-pair[0], pair[1].doc_id))
    return [Hit(doc, round(score, 3), best_passage(doc.body, terms, idf)) for score, doc in scored[:limit]]


def best_passage(body: str, terms: set[str], idf: dict[str, float], limit: int = EXCERPT_CHARS) -> str:
    """The whole body when short; else the best-matching sentence widened with its neighbours."""
    body = body.strip()
    if len(body) <= limit:
        return body
    sentences = [s for s in _SENTENCE_END.split(body) if s]
    weights = [sum(idf.get(t, 0.0) for t in terms & set(_terms(s))) for s in sentences]
    best = max(range(len(sentences)), key=lambda i: (weights[i], -i))
    lo = hi = best
    length = len(sentences[best])
    while True:
        # Grow towards the neighbour that matches more (the next one on a tie), while it fits.
        options = [i for i in (hi + 1, lo - 1) if 0 <= i < len(sentences)]
        options = [i for i in options if length + 1 + len(sentences[i]) <= limit]
        if not options:
            break
        pick = max(options, key=lambda i: weights[i])
        length += 1 + len(sentences[pick])
        lo, hi = min(lo, pick), max(hi, pick)
    passage = " ".join(sentences[lo : hi + 1])
    # A single sentence longer than the limit: cut it at a word boundary.
    if len(passage) > limit:
        passage = passage[: limit - 2].rsplit(" ", 1)[0] + " …"
    return passage


def search_policies(query: str, seller_code: str | None = None, limit: int = 4) -> list[tuple[Hit, PolicyDocument]]:
    """Rank the Sundry-wide policies, plus the supplements of `seller_code` when given.

    Returns (hit, PolicyDocument) pairs so the caller can tell scope and seller.
    """
    rows, docs = _corpus(seller_code or None)
    return [(hit, rows[hit.doc.doc_id]) for hit in rank(query, docs, limit)]


# Policies change rarely (an edit in the admin) and every search reads all of its scope: each process keeps
# the scope it read for CORPUS_SECONDS. A save or delete in this process forgets them at once; other
# processes read the edit within CORPUS_SECONDS.
CORPUS_SECONDS = 10.0
_corpora: dict[str | None, tuple[float, dict, list]] = {}


def _corpus(seller_code: str | None) -> tuple[dict[str, PolicyDocument], list[Doc]]:
    now = time.monotonic()
    cached = _corpora.get(seller_code)
    if cached is not None and now - cached[0] < CORPUS_SECONDS:
        return cached[1], cached[2]
    scope = Q(seller__isnull=True)
    if seller_code:
        scope |= Q(seller__code=seller_code)
    rows = {row.doc_id: row for row in PolicyDocument.objects.filter(scope).select_related("seller")}
    docs = [Doc(row.doc_id, row.title, row.body) for row in rows.values()]
    if len(_corpora) > 256:  # seller codes come from the model's arguments: keep the cache bounded
        _corpora.clear()
    _corpora[seller_code] = (now, rows, docs)
    return rows, docs


def forget_corpora(**kwargs) -> None:
    _corpora.clear()


post_save.connect(forget_corpora, sender=PolicyDocument, dispatch_uid="search-corpus-save")
post_delete.connect(forget_corpora, sender=PolicyDocument, dispatch_uid="search-corpus-delete")
