"""Changing the profile: a draft edited freely, published as a numbered version (by two people when
PROFILE_PUBLISH_NEEDS_TWO is on), any published version made live again in one step, two versions compared.

The live pointer moves by one conditional UPDATE on the version it held when the caller read it: of two people
publishing or rolling back at once, one moves it and the other is told, with nothing of theirs written. Every
step is a ProfileRelease row, which the audit reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from support.models import LiveProfile, ProfileRelease, ProfileVersion
from support.profiles import selectors
from support.profiles.profile import Profile
from support.profiles.reading import ProfileInvalid, profile_from_json

CHANGE_AGENT_PROFILE = "support.change_agent_profile"


class ProfileRefused(Exception):
    """A change refused, in plain words; `status` as an HTTP answer would give it, `code` for programs."""

    def __init__(self, message: str, *, status: int = 409, code: str = "conflict"):
        super().__init__(message)
        self.status, self.code = status, code


@dataclass(frozen=True)
class Released:
    """What a publish did: `kind` "request" (four eyes: the first person's, waiting for a second) or "publish"."""

    kind: str
    version: ProfileVersion
    release: ProfileRelease


def _require(by) -> None:
    if by is None or not by.has_perm(CHANGE_AGENT_PROFILE):
        raise ProfileRefused("Changing the agent profile needs the permission “change the agent profile” "
                             f"({CHANGE_AGENT_PROFILE}).", status=403, code="forbidden")


def _stored(profile: Profile) -> dict:
    data = profile.as_data()
    data.pop("version", None)  # a version's number lives on its row
    return data


def draft_save(*, data: dict, by, known_tools: set[str] | None = None) -> ProfileVersion:
    """Write the draft (made from the live version's place when there is none). Refused in plain words when a
    field is malformed or a limit is past the operator's cap. A first approval of the old text lapses."""
    _require(by)
    try:
        profile = profile_from_json(data, known_tools=known_tools)
    except ProfileInvalid as invalid:
        raise ProfileRefused(str(invalid), status=400, code="invalid_request") from None
    with transaction.atomic():
        current = selectors.draft()
        if current is not None and ProfileVersion.objects.filter(pk=current.pk, state=ProfileVersion.DRAFT).update(
                data=_stored(profile), revision=F("revision") + 1, updated_by=by, updated_at=timezone.now(),
                publish_requested_by=None, publish_requested_at=None):
            return ProfileVersion.objects.get(pk=current.pk)
        try:
            with transaction.atomic():  # a savepoint: someone else's first draft may win the unique draft
                return ProfileVersion.objects.create(data=_stored(profile), based_on_id=selectors.live_version_id(),
                                                     created_by=by, updated_by=by)
        except IntegrityError:
            raise ProfileRefused("Someone started a draft at the same moment; read it and save again.") from None


def draft_publish(*, by, revision: int | None = None) -> Released:
    """Publish the draft as the next numbered version and make it live. `revision`: the draft as the caller
    read it (a later edit is never published unseen). With PROFILE_PUBLISH_NEEDS_TWO, the first person's call
    asks, and another person's makes it live."""
    _require(by)
    now = timezone.now()
    with transaction.atomic():
        draft = selectors.draft()
        if draft is None:
            raise ProfileRefused("There is no draft to publish.", status=404, code="not_found")
        if revision is not None and revision != draft.revision:
            raise ProfileRefused(f"The draft changed since you read it (now revision {draft.revision}); read it "
                                 "again before publishing.")
        try:
            profile_from_json(draft.data)  # the caps may have been lowered since it was saved
        except ProfileInvalid as invalid:
            raise ProfileRefused(str(invalid), status=400, code="invalid_request") from None
        if settings.PROFILE_PUBLISH_NEEDS_TWO:
            if draft.publish_requested_by_id is None:
                return _ask_to_publish(draft, by, now)
            if draft.publish_requested_by_id == by.pk:
                raise ProfileRefused("You asked to publish this draft, so another person with the permission must "
                                     "confirm it.", code="same_person")
        return _publish(draft, by, now)


def _ask_to_publish(draft: ProfileVersion, by, now) -> Released:
    if not ProfileVersion.objects.filter(pk=draft.pk, state=ProfileVersion.DRAFT, revision=draft.revision,
                                         publish_requested_at__isnull=True).update(
            publish_requested_by=by, publish_requested_at=now):
        raise ProfileRefused("The draft changed or was asked for at the same moment; read it again.")
    release = ProfileRelease.objects.create(kind=ProfileRelease.REQUEST, version=draft, by=by, at=now)
    return Released(ProfileRelease.REQUEST, ProfileVersion.objects.get(pk=draft.pk), release)


def _publish(draft: ProfileVersion, by, now) -> Released:
    live_id = _pointer_read()
    number = (ProfileVersion.objects.aggregate(top=Max("number"))["top"] or 0) + 1
    try:
        with transaction.atomic():
            claimed = ProfileVersion.objects.filter(pk=draft.pk, state=ProfileVersion.DRAFT,
                                                    revision=draft.revision).update(
                state=ProfileVersion.PUBLISHED, number=number, published_by=by, published_at=now)
    except IntegrityError:
        claimed = 0  # the number was taken by a publish that committed first
    if not claimed:
        raise ProfileRefused("Someone else published or changed this draft at the same moment; nothing more was "
                             "published. Read the versions again.")
    _pointer_move(live_id, draft.pk, now)
    release = ProfileRelease.objects.create(kind=ProfileRelease.PUBLISH, version_id=draft.pk, previous_id=live_id,
                                            by=by, first_by_id=draft.publish_requested_by_id, at=now)
    return Released(ProfileRelease.PUBLISH, ProfileVersion.objects.get(pk=draft.pk), release)


def version_rollback(*, number: int, by) -> ProfileRelease:
    """Make published version `number` live again, in one step (no draft, no second person)."""
    _require(by)
    target = selectors.version_by_number(number)
    if target is None:
        raise ProfileRefused(f"There is no published version {number}.", status=404, code="not_found")
    now = timezone.now()
    with transaction.atomic():
        live_id = _pointer_read()
        if live_id == target.pk:
            raise ProfileRefused(f"Version {number} is already live.")
        _pointer_move(live_id, target.pk, now)
        return ProfileRelease.objects.create(kind=ProfileRelease.ROLLBACK, version=target, previous_id=live_id,
                                             by=by, at=now)


def version_seed(*, profile: Profile) -> ProfileVersion | None:
    """Publish `profile` as version 1 when the desk has no version yet (the demo's seeding, by no one); None
    when one exists. Not a release in the audit: no person changed anything."""
    if ProfileVersion.objects.filter(state=ProfileVersion.PUBLISHED).exists():
        return None
    now = timezone.now()
    try:
        with transaction.atomic():
            live_id = _pointer_read()
            version = ProfileVersion.objects.create(state=ProfileVersion.PUBLISHED, number=1, data=_stored(profile),
                                                    published_at=now)
            _pointer_move(live_id, version.pk, now)
    except (IntegrityError, ProfileRefused):
        return None  # seeded at the same moment elsewhere
    return version


def _pointer_read() -> int | None:
    LiveProfile.objects.get_or_create(pk=selectors.POINTER)  # the first publish of a desk makes the row
    return selectors.live_version_id()


def _pointer_move(expected: int | None, version_id: int, now) -> None:
    """The one conditional UPDATE: the pointer moves only from the version this caller read. A loser raises,
    and its transaction (a numbered version included) is rolled back."""
    if not LiveProfile.objects.filter(pk=selectors.POINTER, version_id=expected).update(version_id=version_id,
                                                                                        changed_at=now):
        raise ProfileRefused("Someone else changed the live version at the same moment; nothing was changed. Read "
                             "the versions again.")
    selectors.forget_pointer()  # this request's next read sees the new version


# -- comparing ------------------------------------------------------------------------------------------------

def versions_diff(*, a: int | str, b: int | str) -> list[dict]:
    """What differs between two versions (a number, "draft", or 0: the built-in defaults), field by field in
    dotted names: [{"field": "limits.refund_ceiling", "a": "150.00", "b": "80.00"}, ...]. Computed from the
    two rows, never stored."""
    left, right = _flat(_data_of(a)), _flat(_data_of(b))
    return [{"field": name, "a": left.get(name), "b": right.get(name)}
            for name in sorted({*left, *right}) if left.get(name) != right.get(name)]


def _data_of(ref: int | str) -> dict:
    if ref == "draft":
        row = selectors.draft()
        if row is None:
            raise ProfileRefused("There is no draft.", status=404, code="not_found")
        return _stored(Profile.from_data(row.data))
    if ref == 0:
        return _stored(selectors.built_in())
    row = selectors.version_by_number(ref)
    if row is None:
        raise ProfileRefused(f"There is no published version {ref}.", status=404, code="not_found")
    return _stored(Profile.from_data(row.data))


def _flat(data: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in data.items():
        if isinstance(value, dict) and key != "opening_hours" and key != "formality":
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
