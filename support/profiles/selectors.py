"""Reading the profile: the live one, a version's, the draft, and the limits they come to.

`live()` reads the live pointer on every call (one row by its key, with the version's publish time) and keeps
the profiles it built per process, keyed by version id and publish time: a published version never changes,
so a publish in the web process reaches a worker's next run at once, and no process rebuilds the profile for
every read. Within `read_once()` (a request, a run) the pointer is read once: every limit, the widget's face
and the setup gate of one request agree, and a card list costs no pointer read per card. A publish or a
rollback in that scope forgets what was read; the next request and the next run read the pointer again.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from contextvars import ContextVar

from support.models import LiveProfile, ProfileVersion
from support.ops.prepared import Prepared
from support.profiles import caps
from django.conf import settings

from support.profiles.profile import NEUTRAL, SUNDRY, Profile

POINTER = 1  # the live pointer's row
REMOTE_BACKENDS = ("http", "shopify")  # a shop's own orders: its desk is being set up until a first publish
_built: dict[tuple, Profile] = {}
_lock = threading.Lock()
KEEP = 16  # profiles kept per process (a rollback's worth of old versions)
# The live pointer as read in the current scope (a request, a run): None outside any scope.
_scope: ContextVar[dict | None] = ContextVar("live_pointer_read", default=None)
_UNREAD = object()


@contextmanager
def read_once():
    """Within the block the live pointer is read at most once (one value per thread and asyncio task)."""
    token = _scope.set({})
    try:
        yield
    finally:
        _scope.reset(token)


def forget_pointer() -> None:
    """The pointer moved (a publish, a rollback): the current scope reads it again."""
    memo = _scope.get()
    if memo is not None:
        memo.clear()


def _pointer() -> tuple | None:
    """(version id, its publish time) of the live version, or None while none is published."""
    memo = _scope.get()
    found = memo.get("pointer", _UNREAD) if memo is not None else _UNREAD
    if found is _UNREAD:
        row = _live_pointer()
        found = (row["version_id"], row["version__published_at"]) if row is not None else None
        if memo is not None:
            memo["pointer"] = found
    return found


def live_version_id() -> int | None:
    """The id of the live version (None: none published yet)."""
    return LiveProfile.objects.filter(pk=POINTER).values_list("version_id", flat=True).first()


def live_version() -> ProfileVersion | None:
    """The live version's row without its data (its id, number and publish time), or None: what a new run
    records and its events show, in one read."""
    row = _live_pointer()
    if row is None:
        return None
    return ProfileVersion.from_db(ProfileVersion.objects.db, ["id", "number", "published_at"],
                                  [row["version_id"], row["version__number"], row["version__published_at"]])


# The pointer and its version's id, number and publish time, in one statement compiled once per process (it is
# read for every request and every customer message).
_POINTER = Prepared(LiveProfile, lambda: LiveProfile.objects.filter(pk=POINTER, version__isnull=False).values(
    "version_id", "version__number", "version__published_at"))


def _live_pointer() -> dict | None:
    found = _POINTER.rows()
    return found[0] if found else None


def gone_live() -> bool:
    """Whether a profile has been published: until then a desk is being set up (its widget starts no run)."""
    return _pointer() is not None


def being_set_up() -> bool:
    """A shop's own desk (its orders over HTTP or from Shopify) with no profile published yet: its widget says
    support is being set up, and no customer message starts a run. The demo is live from seeding."""
    return settings.SHOP_BACKEND in REMOTE_BACKENDS and not gone_live()


def built_in() -> Profile:
    """The profile before any is published: the demo's on the demo shop, a neutral one on a shop's own desk."""
    return NEUTRAL if settings.SHOP_BACKEND in REMOTE_BACKENDS else SUNDRY


def live() -> Profile:
    """The published profile the desk runs with now (the built-in defaults until one is published)."""
    row = _pointer()
    if row is None:
        return built_in()
    return _profile(row[0], row[1])


def version_profile(version_id: int | None, *, version: ProfileVersion | None = None) -> Profile:
    """The profile of a published version by its id (a run's), or the built-in defaults for None. `version`:
    that row, already read (a run's, with its run), so its publish time is not read again."""
    if version_id is None:
        return built_in()
    if version is not None and version.pk == version_id:
        return _profile(version_id, version.published_at)
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
