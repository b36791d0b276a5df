"""What a tool is to the loop: a name, a schema, a description for the model, and a function.

Tools that touch the shop live in support/tools/; they build these values. The loop only sees this type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

import jsonschema


class ToolError(Exception):
    """An expected failure the model should read and recover from ("no order SU-1 for this customer")."""


class ToolUnavailable(Exception):
    """What the tool needs cannot be reached (the shop is down, or answered nonsense). The model cannot fix
    that: the loop gives it the error as the call's result and stops the run, so a person takes over and
    the customer is told so by the desk, not left to the model's guess."""


@dataclass(frozen=True)
class ToolContext:
    """Who a tool acts for. Built by the caller of the loop; the loop fills in the call it answers."""

    customer_id: int | None = None
    conversation_id: str | None = None
    run_id: str | None = None
    call_id: str = ""
    # Derived from run and call id: a tool that reaches outside the database sends it along.
    idempotency_key: str = ""
    extra: dict = field(default_factory=dict)
    # The calls of this reply already waiting for a person, as (tool name, arguments): a per-conversation limit
    # counts them with what was done and what waited before (the loop fills it in).
    waiting: tuple[tuple[str, dict], ...] = ()


@dataclass(frozen=True)
class Tool:
    name: str
    description: str  # written for the model: what it does, when to use it, what it returns
    parameters: dict  # JSON schema of the arguments object
    fn: Callable[..., Any]  # fn(ctx: ToolContext, **arguments) -> JSON-serialisable value or str
    gated: bool = False  # a person approves each call before it runs
    terminal: bool = False  # once it has run, the run ends
    label: str = ""  # what a customer is shown while it runs, e.g. "Looking up your order"
    # Reads only (no effect anywhere): several such calls of one reply run at the same time.
    read_only: bool = False
    # For a gated tool, or a call needs_person holds: check(ctx, **arguments) raises ToolError when the call could not be carried out
    # (not this customer's order, over a ceiling, over a balance), so no person is asked to approve a
    # call the tool would refuse. The tool checks again when it runs: things change while a call waits.
    check: Callable[..., None] | None = None
    # For an ungated tool: needs_person(arguments) -> a reason when this call must wait for a person all the
    # same (a seller message that carries the customer's contact data), "" when it may run.
    needs_person: Callable[[dict], str] | None = None
    # What a gated call does, for remembering a rejection: fingerprint(arguments) -> str. Two calls with
    # one fingerprint are one action however they are worded (a refund on one order, whatever the amount).
    fingerprint: Callable[[dict], str] | None = None

    def spec(self) -> dict:
        """The entry for the request's `tools` list."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def needs_approval(self, arguments: dict) -> bool:
        return self.gated or bool(self.needs_person and self.needs_person(arguments))

    def action(self, arguments: dict) -> str:
        """The call's fingerprint: the tool's own, or its name and exact arguments."""
        if self.fingerprint is not None:
            return f"{self.name}:{self.fingerprint(arguments)}"
        return self.name + json.dumps(arguments, sort_keys=True)

    def validation_error(self, arguments: Any) -> str | None:
        """None when the arguments match the schema, else a sentence the model can act on."""
        if not isinstance(arguments, dict):
            return f"arguments must be a JSON object, got {type(arguments).__name__}"
        error = jsonschema.exceptions.best_match(_validator(self.parameters).iter_errors(arguments))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "arguments"
            return f"invalid arguments for {self.name} at {where}: {error.message}"
        return None


_validators: dict[str, "jsonschema.protocols.Validator"] = {}


def _validator(schema: dict):
    """One validator per schema, built (and the schema checked) once: jsonschema.validate redoes both per call."""
    key = json.dumps(schema, sort_keys=True)
    validator = _validators.get(key)
    if validator is None:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = _validators[key] = cls(schema)
    return validator
