"""The desk's use-cases: conversations, runs (runner, journal), approvals, staff actions, inbox."""
