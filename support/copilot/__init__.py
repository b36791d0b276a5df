"""The staff's copilot: drafts, summaries, suggested next steps and answers for the person who has a conversation,
from the agent's loop with read tools only (docs/copilot.md). Above the desk, below the way in."""

from .reads import copilot_view, run_json, summary_json
from .services import CopilotRefused, copilot_execute, copilot_start, copilot_sweep, draft_for_reply, draft_used

__all__ = ["CopilotRefused", "copilot_execute", "copilot_start", "copilot_sweep", "copilot_view", "draft_for_reply",
           "draft_used", "run_json", "summary_json"]
