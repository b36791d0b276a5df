"""Reading the profile: the live one, a version's, the draft, and the limits they come to.

`live()` reads the live pointer on every call (one row by its key, with the version's publish time) and keeps
the profiles it built per process, keyed by version id and publish time: a published version never changes,
so a publish in the web process reaches a worker's next run at once, and no process rebuilds the profile for
every read.
"""

from __future__ import annotations

import threading

from support.models import LiveProfile, ProfileVersion
from support.profiles import caps
from support.profiles.profile import SUNDRY, Profile

POINTER = 1  # the live pointer's row
_built: dict[tuple, Profile] = {}
_lock = threading.Lock()
KEEP = 16  # profiles kept per process (a rollback's worth of old versions)


def live_version_id() -> int | None:
    """The id of the live version (None: none published yet)."""
    return LiveProfile.objects.filter(pk=POINTER).values_list("version_id", flat=True).first()


def gone_live() -> bool:
    """Whether a profile has been published: until then a desk is being set up (its widget starts no run)."""
    return LiveProfile.objects.filter(pk=POINTER, version__isnull=False).exists()


def live() -> Profile:
    """The published profile the desk runs with now (the built-in defaults until one is published)."""
    row = LiveProfile.objects.filter(pk=POINTER, version__isnull=False).values_list(
        "version_id", "version__published_at").first()
    if row is None:
        return SUNDRY
    return _profile(row[0], row[1])


def version_profile(version_id: int | None) -> Profile:
    """The profile of a published version by its id (a run's), or the built-in defaults for None."""
    if version_id is None:
        return SUNDRY
    published_at = ProfileVersion.objects.filter(pk=version_id).values_list("published_at", flat=True).first()
    return _profile(version_id, published_at)


def _profile(version_id: int, published_at) -> Profile:
    key = (version_id, published_at)  # with the time: a test database reuses ids for other versions
    with _lock:
        found = _built.get(key)
    if found is not None:
        return found
    row = ProfileVersion.objects.values_list("data", "number").get(pk=version_id)
    built = Profile.from_data(row[0], version=row[1] or 0)
    with _lock:
        if len(_built) >= KEEP:
            _built.clear()
        _built[key] = built
    return built


def effective_limits(profile: Profile | None = None) -> caps.EffectiveLimits:
    """The limits the desk enforces: `profile`'s (the live one unless given) within the operator's caps."""
    return caps.limits_of(profile if profile is not None else live())


def draft() -> ProfileVersion | None:
    return ProfileVersion.objects.filter(state=ProfileVersion.DRAFT).first()


def version_by_number(number: int) -> ProfileVersion | None:
    return ProfileVersion.objects.filter(state=ProfileVersion.PUBLISHED, number=number).first()


def versions() -> list[ProfileVersion]:
    """The published versions, newest first."""
    return list(ProfileVersion.objects.filter(state=ProfileVersion.PUBLISHED).select_related("published_by")
                .order_by("-number"))
