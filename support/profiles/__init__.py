"""The agent profile: who the agent is, whom it works for, how it speaks and what it may do (DESIGN decision 15).

`live()` is what every part of the desk reads: the prompt, the tools and limits of a run, the widget, the e-mails
and the customer pages. Environment variables are the operator's defaults and caps; a profile may tighten a limit,
never loosen it past the cap (`caps.py`).
"""

from support.profiles.profile import SUNDRY, Appearance, Limits, Profile, Voice  # noqa: F401
from support.profiles.selectors import live  # noqa: F401
