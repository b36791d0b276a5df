"""The agent profile's versions: a draft edited freely, published as a numbered version (who, when), rolled back
in one step, compared field by field; four eyes on publish when PROFILE_PUBLISH_NEEDS_TWO asks; a lead held to
the operator's caps; the demo seeded as version 1; every publish and rollback in the audit.

Who may do what: Lee and Kim are support leads (support.change_agent_profile); Sam is a support agent and may
change nothing.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from support import profiles
from support.desk import audit, permissions, services
from support.desk.demo import seed_demo
from support.models import LiveProfile, ProfileRelease, ProfileVersion
from support.profiles import Limits, ProfileRefused, caps
from support.tools.common import refund_ceiling
from tests.test_staff_permissions import member


@pytest.fixture
def lee(demo):
    return member("lee", permissions.LEADS)


@pytest.fixture
def kim(demo):
    return member("kim", permissions.LEADS)


@pytest.fixture
def sam(demo):
    return member("sam", permissions.AGENTS)


def data(**changes) -> dict:
    return replace(profiles.live(), **changes).as_data()


def limits(**values) -> dict:
    return data(limits=Limits(**values))


def refused(call) -> ProfileRefused:
    with pytest.raises(ProfileRefused) as caught:
        call()
    return caught.value


# -- draft, publish, roll back --------------------------------------------------------------------------------

def test_the_demo_is_seeded_as_version_1_once(demo):
    assert profiles.live() == replace(profiles.SUNDRY, version=1)
    seed_demo()
    assert ProfileVersion.objects.count() == 1 and not ProfileRelease.objects.exists()  # no person's change


def test_no_version_means_the_built_in_defaults(db):
    assert profiles.live() == profiles.SUNDRY and profiles.live_version_id() is None


def test_a_draft_is_edited_freely_and_changes_nothing_live(lee):
    first = profiles.draft_save(data=data(agent_name="Mila"), by=lee)
    again = profiles.draft_save(data=data(agent_name="Mira"), by=lee)
    assert again.pk == first.pk and again.revision == 2 and again.data["agent_name"] == "Mira"
    assert again.number is None and again.based_on.number == 1
    assert profiles.live().agent_name == "Sundry's assistant"


def test_publishing_makes_the_next_numbered_version_live_with_who_and_when(lee):
    profiles.draft_save(data=data(agent_name="Mila"), by=lee)
    released = profiles.draft_publish(by=lee)
    version = released.version
    assert released.kind == "publish" and version.number == 2 and version.state == "published"
    assert version.published_by == lee and version.published_at is not None
    assert profiles.live().agent_name == "Mila" and profiles.live().version == 2
    assert ProfileVersion.objects.filter(state="draft").count() == 0  # the next edit starts a new draft


def test_a_published_version_is_never_edited_the_next_save_is_a_new_draft(lee):
    profiles.draft_save(data=data(agent_name="Mila"), by=lee)
    published = profiles.draft_publish(by=lee).version
    draft = profiles.draft_save(data=data(agent_name="Nova"), by=lee)
    assert draft.pk != published.pk and draft.based_on == published
    published.refresh_from_db()
    assert published.data["agent_name"] == "Mila"


def test_a_draft_changed_since_it_was_read_is_not_published(lee, kim):
    read = profiles.draft_save(data=data(agent_name="Mila"), by=lee)
    profiles.draft_save(data=data(agent_name="Oops"), by=kim)
    why = refused(lambda: profiles.draft_publish(by=lee, revision=read.revision))
    assert why.status == 409 and "changed since you read it" in str(why)
    assert profiles.live().version == 1


def test_nothing_to_publish_without_a_draft(lee):
    assert refused(lambda: profiles.draft_publish(by=lee)).status == 404


def test_a_rollback_makes_an_earlier_version_live_in_one_step(lee):
    profiles.draft_save(data=data(agent_name="Mila"), by=lee)
    profiles.draft_publish(by=lee)
    release = profiles.version_rollback(number=1, by=lee)
    assert release.kind == "rollback" and release.previous.number == 2
    assert profiles.live() == replace(profiles.SUNDRY, version=1)
    assert refused(lambda: profiles.version_rollback(number=1, by=lee)).status == 409  # already live
    assert refused(lambda: profiles.version_rollback(number=9, by=lee)).status == 404


def test_the_live_profile_follows_the_pointer_at_once(lee):
    # Another process (the web) moves the pointer: this one's next read sees it, its built profiles kept aside.
    profiles.draft_save(data=data(agent_name="Mila"), by=lee)
    two = profiles.draft_publish(by=lee).version
    assert profiles.live().agent_name == "Mila"
    LiveProfile.objects.filter(pk=1).update(version=ProfileVersion.objects.get(number=1))
    assert profiles.live().agent_name == "Sundry's assistant"
    LiveProfile.objects.filter(pk=1).update(version=two)
    assert profiles.live().agent_name == "Mila"


def test_a_diff_is_computed_from_two_versions_field_by_field(lee):
    profiles.draft_save(data=data(agent_name="Mila", guidance=("Never promise a delivery date",),
                                  limits=Limits(refund_ceiling=Decimal("80.00"))), by=lee)
    assert profiles.versions_diff(a=1, b="draft") == [
        {"field": "agent_name", "a": "Sundry's assistant", "b": "Mila"},
        {"field": "guidance", "a": [], "b": ["Never promise a delivery date"]},
        {"field": "limits.refund_ceiling", "a": None, "b": "80.00"},
    ]
    profiles.draft_publish(by=lee)
    assert profiles.versions_diff(a=2, b=2) == [] and len(profiles.versions_diff(a=0, b=2)) == 3
    assert refused(lambda: profiles.versions_diff(a=1, b=5)).status == 404


# -- who may ----------------------------------------------------------------------------------------------------

def test_an_agent_without_the_permission_may_not_draft_publish_or_roll_back(lee, sam):
    profiles.draft_save(data=data(agent_name="Mila"), by=lee)
    for call in (lambda: profiles.draft_save(data=data(), by=sam), lambda: profiles.draft_publish(by=sam),
                 lambda: profiles.version_rollback(number=1, by=sam)):
        assert refused(call).status == 403
    assert ProfileVersion.objects.get(state="draft").data["agent_name"] == "Mila"


def test_leads_have_the_permission_and_agents_do_not(lee, sam):
    assert lee.has_perm("support.change_agent_profile") and not sam.has_perm("support.change_agent_profile")
    assert permissions.profile_change_refusal(lee) is None
    assert "support.change_agent_profile" in permissions.profile_change_refusal(sam)


# -- four eyes ---------------------------------------------------------------------------------------------------

def test_with_four_eyes_the_first_person_asks_and_another_publishes(lee, kim, settings):
    settings.PROFILE_PUBLISH_NEEDS_TWO = True
    profiles.draft_save(data=data(agent_name="Mila"), by=lee)
    asked = profiles.draft_publish(by=lee)
    assert asked.kind == "request" and asked.version.publish_requested_by == lee
    assert profiles.live().version == 1  # nothing live yet
    why = refused(lambda: profiles.draft_publish(by=lee))
    assert why.code == "same_person" and profiles.live().version == 1
    done = profiles.draft_publish(by=kim)
    assert done.kind == "publish" and done.release.first_by == lee and done.release.by == kim
    assert profiles.live().agent_name == "Mila"


def test_with_four_eyes_an_edit_after_the_request_needs_a_new_request(lee, kim, settings):
    settings.PROFILE_PUBLISH_NEEDS_TWO = True
    profiles.draft_save(data=data(agent_name="Mila"), by=lee)
    profiles.draft_publish(by=lee)
    profiles.draft_save(data=data(agent_name="Sneaky"), by=kim)  # kim changes it, then "confirms" her own text
    assert profiles.draft_publish(by=kim).kind == "request"
    assert profiles.live().version == 1


# -- the operator's caps ---------------------------------------------------------------------------------------

def test_a_lead_may_tighten_a_limit(lee):
    profiles.draft_save(data=limits(refund_ceiling="80.00", max_steps=6, auto_approve_up_to="0"), by=lee)
    profiles.draft_publish(by=lee)
    effective = profiles.effective_limits()
    assert effective.refund_ceiling == Decimal("80.00") and effective.max_steps == 6
    assert refund_ceiling() == Decimal("80.00")


@pytest.mark.parametrize(("values", "words"), [
    ({"refund_ceiling": "200.00"}, "The most the agent may refund at once may be at most 150.00 EUR, the "
                                   "operator's cap (REFUND_CEILING); 200.00 EUR was asked."),
    ({"max_steps": 40}, "The steps of one run may be at most 12 steps, the operator's cap (AGENT_MAX_STEPS); 40 "
                        "steps was asked."),
    ({"max_cost_usd_per_conversation": 5.0}, "(CONVERSATION_MAX_COST_USD_PER_DAY)"),
    ({"auto_approve_up_to": "20.00"}, "(AUTO_APPROVE_REFUNDS_UP_TO)"),
    ({"max_steps": 0}, "The steps of one run must be at least 1 steps."),
])
def test_a_lead_is_held_to_the_operators_caps_in_plain_words(lee, values, words):
    why = refused(lambda: profiles.draft_save(data=limits(**values), by=lee))
    assert why.status == 400 and words in str(why)
    assert not ProfileVersion.objects.filter(state="draft").exists()


def test_two_person_approval_may_be_lowered_or_turned_on_but_never_raised_or_off(lee, settings):
    settings.SECOND_APPROVAL_ABOVE = Decimal("0")  # off: a lead may turn it on
    assert caps.problems(Limits(second_approval_above=Decimal("50"))) == []
    settings.SECOND_APPROVAL_ABOVE = Decimal("100")
    assert caps.problems(Limits(second_approval_above=Decimal("50"))) == []
    assert "may be at most 100.00 EUR" in caps.problems(Limits(second_approval_above=Decimal("150")))[0]
    assert "may not be turned off" in caps.problems(Limits(second_approval_above=Decimal("0")))[0]


def test_the_profiles_second_approval_threshold_is_what_four_eyes_on_refunds_reads(lee, settings):
    settings.SECOND_APPROVAL_ABOVE = Decimal("100")
    profiles.draft_save(data=limits(second_approval_above="40.00"), by=lee)
    profiles.draft_publish(by=lee)
    assert permissions.second_approval_above() == Decimal("40.00")
    assert permissions.needs_second_approver("issue_refund", {"amount": "45.00"})


def test_auto_approval_reads_the_profiles_lower_limit(lee, settings):
    settings.AUTO_APPROVE_REFUNDS_UP_TO = Decimal("50")
    assert services.refund_auto_approvable({"amount": "30.00"})
    profiles.draft_save(data=limits(auto_approve_up_to="20.00"), by=lee)
    profiles.draft_publish(by=lee)
    assert not services.refund_auto_approvable({"amount": "30.00"})


def test_a_cap_lowered_after_publishing_wins_over_the_published_value(lee, settings):
    profiles.draft_save(data=limits(refund_ceiling="120.00", max_steps=10), by=lee)
    profiles.draft_publish(by=lee)
    settings.REFUND_CEILING, settings.AGENT_MAX_STEPS = Decimal("90.00"), 8
    effective = profiles.effective_limits()
    assert effective.refund_ceiling == Decimal("90.00") and effective.max_steps == 8


def test_unset_limits_are_the_operators_defaults(demo, settings):
    settings.REFUND_CEILING, settings.AGENT_MAX_STEPS = Decimal("99.00"), 7
    effective = profiles.effective_limits()
    assert effective.refund_ceiling == Decimal("99.00") and effective.max_steps == 7


def test_malformed_fields_are_refused_each_in_plain_words(lee):
    bad = {**data(), "shop_name": 5, "guidance": ["ok", ""], "voice": {"formality": {"de": "Ihr"}},
           "limits": {"refund_ceiling": "lots", "max_steps": "ten"}}
    why = str(refused(lambda: profiles.draft_save(data=bad, by=lee)))
    for words in ("shop_name must be text", "guidance is a list", 'voice.formality gives each language "Sie" or "du"',
                  'limits.refund_ceiling is an amount like "25.00"', "limits.max_steps is a whole number"):
        assert words in why


def test_a_tool_name_the_desk_does_not_have_is_refused(lee):
    why = refused(lambda: profiles.draft_save(data=limits(gated_tools=("delete_everything",)), by=lee,
                                              known_tools={"get_order"}))
    assert "No tool is called delete_everything" in str(why)


# -- the audit ------------------------------------------------------------------------------------------------

def test_every_request_publish_and_rollback_is_in_the_audit_with_what_changed(lee, kim, settings):
    settings.PROFILE_PUBLISH_NEEDS_TWO = True
    profiles.draft_save(data=data(agent_name="Mila"), by=lee)
    profiles.draft_publish(by=lee)
    profiles.draft_publish(by=kim)
    profiles.version_rollback(number=1, by=lee)
    rows = [r for r in audit.audit_rows(audit.AuditFilter()) if r["record"] == "agent_profile"]
    assert [(r["event"], r["person"], r["other_person"]) for r in rows] == [
        ("profile_publish_asked", "lee", ""),
        ("profile_published", "kim", "lee"),
        ("profile_rolled_back", "lee", ""),
    ]
    assert rows[1]["executed_arguments"] == {"version": 2, "previous": 1} and rows[1]["changed"] == "agent_name"
    assert rows[2]["executed_arguments"] == {"version": 1, "previous": 2} and rows[2]["changed"] == "agent_name"
    exported = "".join(audit.csv_lines(audit.audit_rows(audit.AuditFilter(person=kim))))
    assert "profile_published" in exported and "profile_rolled_back" not in exported
