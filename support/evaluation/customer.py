"""The simulated customer: a second model writes the customer's next message from a τ²-bench-shaped user
scenario (reason for the call, what they know, what they do not, how to behave, a persona).

It reads only what the customer sees (their own messages and the desk's answers), with the roles turned
round: the desk's answers are its "user" messages. It writes one line at a time and ends the chat with a
token: ###STOP### (done), ###TRANSFER### (handed to a person) or ###OUT-OF-SCOPE### (asked for something the
scenario does not give). It goes through the same model client as the agent (support/agent/llm.py): the same
timeouts, retries and token accounting; its temperature is sent with each request.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from support.agent.types import ModelError, Observer, Transcript

from .scenario import SimulatedCustomer

# The stand-in recognises a request by these first words (standin/customer.py) and plays the customer.
PROMPT = """You are role-playing a customer of Sundry, an online marketplace, chatting with its support desk.
Stay in character; you are the customer, never the support agent.

Reason for your call:
{reason_for_call}

What you know:
{known_info}

What you do not know:
{unknown_info}

How to behave:
{task_instructions}

Persona:
{persona}

Rules:
- Write only the customer's next chat message, one line: first person, plain words, no more than needed.
- Give what you know only when it is asked for or needed; never make up order numbers, amounts or facts.
- When everything you called about is dealt with (done or refused), write ###STOP### alone.
- When you are told a person will take over, write ###TRANSFER### alone.
- When you are asked for something you do not know and cannot go on without it, write ###OUT-OF-SCOPE### alone."""
PROMPT_VERSION = "2"
NOT_GIVEN = "(nothing more)"

# What ends the chat, by the name a scenario's expect_end uses (scenario.ENDINGS).
TOKENS = {"###STOP###": "stop", "###TRANSFER###": "transfer", "###OUT-OF-SCOPE###": "out-of-scope"}
OPENING = "(The support chat is open. Write your first message.)"
DEFAULT_TEMPERATURE = 0.0


@dataclass
class CustomerTurn:
    text: str | None  # None: the customer is done (see `end`) or failed (see `error`)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""
    end: str = ""  # "stop" | "transfer" | "out-of-scope" when the customer ended the chat; "waiting": no answer yet


def prompt(sim: SimulatedCustomer) -> str:
    return PROMPT.format(reason_for_call=sim.reason_for_call.strip(), known_info=sim.known_info.strip() or NOT_GIVEN,
                         unknown_info=sim.unknown_info.strip() or NOT_GIVEN,
                         task_instructions=sim.task_instructions.strip() or NOT_GIVEN,
                         persona=sim.persona.strip() or NOT_GIVEN)


def ending(text: str) -> str:
    """The end a reply asks for ("" for none): the first token found anywhere in it."""
    found = [(text.find(token), name) for token, name in TOKENS.items() if token in text]
    return min(found)[1] if found else ""


class CustomerModel:
    def __init__(self, model, temperature: float | None = DEFAULT_TEMPERATURE):
        self.model = model  # an OpenAIModel (support.desk.assistant.model(...)) or anything with complete()
        self.temperature = temperature

    def info(self) -> dict:
        """What played the customer, for the reports: the model, its temperature and the prompt's version."""
        return {"model": getattr(self.model, "model", type(self.model).__name__), "temperature": self.temperature,
                "prompt_version": PROMPT_VERSION,
                "prompt_fingerprint": hashlib.sha256(PROMPT.encode()).hexdigest()[:12]}

    def next_message(self, sim: SimulatedCustomer, seen: list[tuple[str, str]]) -> CustomerTurn:
        """`seen`: (who, text) of what the customer saw, who being "customer" or "desk", oldest first."""
        messages = [{"role": "system", "content": prompt(sim)}]
        if not seen or seen[0][0] == "customer":
            messages.append({"role": "user", "content": OPENING})
        for who, text in seen:
            role = "assistant" if who == "customer" else "user"
            if messages[-1]["role"] == role:  # two desk messages in a row read as one
                messages[-1]["content"] += "\n\n" + text
            else:
                messages.append({"role": role, "content": text})
        if messages[-1]["role"] == "assistant":
            return CustomerTurn(None, end="waiting")  # the desk said nothing since (a refund awaits staff)
        try:
            reply = self._complete(messages)
        except ModelError as e:
            return CustomerTurn(None, e.prompt_tokens, e.completion_tokens, error=str(e))
        text = (reply.content or "").strip()
        end = ending(text)
        if not text:
            return CustomerTurn(None, reply.prompt_tokens, reply.completion_tokens,
                                error="the customer model wrote nothing (no message and no ending token)")
        return CustomerTurn(None if end else text, reply.prompt_tokens, reply.completion_tokens, end=end)

    def _complete(self, messages: list[dict]):
        """One request without tools (an empty tools list is refused by some endpoints), with the temperature
        in its body, when the client builds one (OpenAIModel.body)."""
        body = getattr(self.model, "body", None)
        if body is None:
            return self.model.complete(Transcript(messages), [], Observer())
        head = b"{" if self.temperature is None else b'{"temperature":' + repr(float(self.temperature)).encode() + b","

        def adjusted(transcript, tools):
            return head + body(transcript, tools)[1:].replace(b',"tools":[]', b"", 1)
        self.model.body = adjusted
        try:
            return self.model.complete(Transcript(messages), [], Observer())
        finally:
            del self.model.body
