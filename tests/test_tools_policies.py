"""search_policy and the BM25 ranking under it: Sundry-wide policies always, a seller's supplement only
when that seller is named; the core ranking is tested on plain documents, without the database.
"""

from __future__ import annotations

import pytest

from support.shop.search import Doc, best_passage, idf_table, rank, stem, tokenise
from support.tools.policies import search_policy

LOSS_QUERY = "parcel marked delivered but not received"


# --- the pure core ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "words",
    [("parcels", "parcel"), ("delivered", "delivery", "deliveries", "deliver"), ("damaged", "damage"),
     ("received", "receive", "receiving"), ("shipped", "shipping", "ship"), ("refunds", "refunded", "refund")],
)
def test_it_stems_word_forms_to_one_term(words):
    assert len({stem(w) for w in words}) == 1


def test_it_keeps_short_and_double_s_words_whole():
    assert (stem("loss"), stem("miss"), stem("bus")) == ("loss", "miss", "bus")


def test_it_lowercases_and_drops_stop_words_and_punctuation():
    assert tokenise("My parcel was NOT delivered, but it's marked!") == ["parcel", "deliver", "mark"]


DOCS = [
    Doc("A", "Missing parcels", "A parcel marked delivered that never arrived is a missing parcel."),
    Doc("B", "Damaged items", "Broken or damaged items are refunded after photos."),
    Doc("C", "Weather delays", "Severe weather holds parcels at a depot for a few days."),
    Doc("D", "Gift cards", "Gift cards never expire."),
]


def test_it_ranks_the_document_about_the_query_first():
    hits = rank("my parcel was delivered but is missing", DOCS)
    assert [h.doc.doc_id for h in hits] == ["A", "C"]
    assert hits[0].score > hits[1].score > 0


def test_it_leaves_out_documents_sharing_no_term_and_keeps_the_limit():
    assert [h.doc.doc_id for h in rank("damaged", DOCS)] == ["B"]
    assert rank("the and of", DOCS) == []
    assert len(rank("parcel weather damaged gift", DOCS, limit=2)) == 2


def test_it_breaks_ties_by_doc_id_so_row_order_does_not_matter():
    twins = [Doc("Z", "Same", "identical words here"), Doc("M", "Same", "identical words here")]
    assert [h.doc.doc_id for h in rank("identical", twins)] == ["M", "Z"]
    assert [h.doc.doc_id for h in rank("identical", twins[::-1])] == ["M", "Z"]


def test_it_weighs_rare_terms_more_than_common_ones():
    idf = idf_table(DOCS)
    assert idf["gift"] > idf["parcel"]


def test_it_uses_a_short_body_whole_as_the_excerpt():
    assert rank("gift", DOCS)[0].excerpt == "Gift cards never expire."


def test_it_excerpts_the_best_matching_passage_of_a_long_body():
    filler = " ".join(f"Sentence {i} talks about opening hours of the shop." for i in range(12))
    body = f"{filler} Weather delays over 3 days refund the shipping fee. {filler}"
    terms = set(tokenise("weather delay shipping fee"))
    excerpt = best_passage(body, terms, idf_table([Doc("X", "", body)]))
    assert "Weather delays over 3 days refund the shipping fee." in excerpt
    assert len(excerpt) <= 600
    assert excerpt != body[:600]


def test_it_cuts_one_overlong_sentence_at_a_word():
    body = "weather " * 200
    excerpt = best_passage(body, {"weather"}, {"weather": 1.0})
    assert len(excerpt) <= 600 and excerpt.endswith("…")


# --- the tool, on the demo policies ------------------------------------------------------------------


def doc_ids(result: dict) -> list[str]:
    return [r["doc_id"] for r in result["results"]]


def test_it_finds_sundry_and_the_sellers_loss_policy_first_when_the_seller_is_named(ctx_for):
    result = search_policy(ctx_for("maya@example.com"), query=LOSS_QUERY, seller_id="S-HL")
    assert set(doc_ids(result)[:2]) == {"POL-LOSS", "POL-HL-LOSS"}
    supplement = next(r for r in result["results"] if r["doc_id"] == "POL-HL-LOSS")
    assert supplement["scope"] == "seller" and supplement["seller_id"] == "S-HL"
    assert "48 hours" in supplement["excerpt"]
    assert set(supplement) == {"doc_id", "title", "scope", "seller_id", "version", "excerpt", "score"}


def test_it_leaves_supplements_out_when_no_seller_is_named(ctx_for):
    result = search_policy(ctx_for("maya@example.com"), query=LOSS_QUERY)
    assert doc_ids(result)[0] == "POL-LOSS"
    assert "POL-HL-LOSS" not in doc_ids(result)
    assert all(r["scope"] == "sundry" and "seller_id" not in r for r in result["results"])


def test_it_never_shows_another_sellers_supplement(ctx_for):
    ctx = ctx_for("maya@example.com")
    assert "POL-HL-LOSS" not in doc_ids(search_policy(ctx, query=LOSS_QUERY, seller_id="S-BE"))
    assert "POL-BE-DAMAGE" not in doc_ids(search_policy(ctx, query="item arrived damaged cracked", seller_id="S-HL"))
    assert "POL-BE-DAMAGE" in doc_ids(search_policy(ctx, query="item arrived damaged cracked", seller_id="S-BE"))


def test_it_returns_at_most_4_results_best_first(ctx_for):
    results = search_policy(ctx_for("maya@example.com"), query="parcel refund damaged weather wrong item person")[
        "results"
    ]
    assert len(results) == 4
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)


def test_it_finds_the_weather_delay_rule(ctx_for):
    result = search_policy(ctx_for("maya@example.com"), query="parcel held by severe weather", seller_id="sundry")
    assert doc_ids(result)[0] == "POL-DELAY"
    assert "more than 3 days" in result["results"][0]["excerpt"]


def test_it_answers_an_unknown_seller_with_the_sundry_policies(ctx_for):
    result = search_policy(ctx_for("maya@example.com"), query=LOSS_QUERY, seller_id="S-XX")
    assert doc_ids(result)[0] == "POL-LOSS"
    assert all(r["scope"] == "sundry" for r in result["results"])


def test_it_returns_no_results_for_a_query_of_stop_words(ctx_for):
    assert search_policy(ctx_for("maya@example.com"), query="what is the") == {"results": []}


# --- the corpus each process keeps ----------------------------------------------------------------------


@pytest.mark.django_db
def test_an_edit_saved_in_this_process_is_searched_at_once_and_one_from_elsewhere_within_the_cache_time(
        demo, monkeypatch):
    from support.models import PolicyDocument
    from support.shop import search

    def titles(query):
        return [r["title"] for r in search_policy(None, query=query)["results"]]

    assert "Gift wrapping" not in titles("gift wrapping ribbon")
    PolicyDocument.objects.create(doc_id="gift-wrap", title="Gift wrapping", body="Gift wrapping with a ribbon is free.")
    assert titles("gift wrapping ribbon")[0] == "Gift wrapping"  # the save forgot the cached corpus

    # Another process's edit sends no signal here: this process reads it once its copy is CORPUS_SECONDS old.
    PolicyDocument.objects.filter(doc_id="gift-wrap").update(title="Gift wrapping and cards")
    assert titles("gift wrapping ribbon")[0] == "Gift wrapping"
    now = search.time.monotonic()
    monkeypatch.setattr(search.time, "monotonic", lambda: now + search.CORPUS_SECONDS + 1)
    assert titles("gift wrapping ribbon")[0] == "Gift wrapping and cards"
