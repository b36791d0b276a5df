"""The agent profile: who the agent is, whom it works for, how it speaks and what it may do (DESIGN decision 15).

`live()` is what every part of the desk reads: the prompt, the tools and limits of a run, the widget, the e-mails
and the customer pages. Environment variables are the operator's defaults and caps; a profile may tighten a limit,
never loosen it past the cap (`caps.py`); `effective_limits()` is what the desk enforces. Versions are drafted,
published and rolled back by `services.py`; a run keeps the id of the version it ran with (`version_profile()`).
"""

from support.profiles import selectors
from support.profiles.caps import EffectiveLimits  # noqa: F401
from support.profiles.profile import NEUTRAL, SUNDRY, Appearance, Limits, Profile, Voice  # noqa: F401
from support.profiles.selectors import (  # noqa: F401
    being_set_up,
    built_in,
    effective_limits,
    gone_live,
    live_version,
    live_version_id,
    read_once,
    version_profile,
)
from support.profiles.services import (  # noqa: F401
    CHANGE_AGENT_PROFILE,
    ProfileRefused,
    draft_publish,
    draft_save,
    version_rollback,
    version_seed,
    versions_diff,
)


def live() -> Profile:
    """The published profile the desk runs with now: `selectors.live()`, looked up when called (the one reader)."""
    return selectors.live()
