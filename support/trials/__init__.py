"""Testing a draft of the agent profile before it goes live: the evaluation suite played on the draft and on the
live version side by side, in a worker, each in a process and a throwaway database of its own
(`manage.py evaluate`), so the live desk's conversations are never touched. `draft_tested()` says whether the
current draft has been tested."""

from support.trials.services import (  # noqa: F401
    TEST_DRAFT,
    DraftTestRefused,
    draft_test_estimate,
    draft_test_execute,
    draft_test_start,
    draft_tests_sweep,
    report_paths,
)
from support.profiles.setup import draft_tested  # noqa: F401  (the checklist's step, read here too)
