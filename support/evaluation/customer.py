"""The simulated customer: a second model writes the customer's next message from a persona and a goal.

It reads only what the customer sees (their own messages and the desk's answers), with the roles turned
round: the desk's answers are its "user" messages. It ends the conversation by calling end_conversation
(or by answering "[done]", for models that do not call tools well). It goes through the same model client
as the agent (support/agent/llm.py): the same timeouts, retries and token accounting.
"""

from __future__ import annotations

from dataclasses import dataclass

from support.agent.types import ModelError, Observer, Transcript

from .scenario import SimulatedCustomer

# The stand-in recognises a request by these first words (standin/customer.py) and plays the customer.
PROMPT = """You are role-playing a customer of Sundry, an online marketplace, chatting with its support desk.
Persona: {persona}
Your goal: {goal}
Write only the customer's next chat message: one to three sentences, first person, plain words. Answer what
the support desk asks you when you can. When your goal is met, when you have been told a person will take
over, or when you cannot get further, call end_conversation (or reply with exactly [done]) instead."""

DONE = "[done]"
END_TOOL = {"type": "function", "function": {
    "name": "end_conversation",
    "description": "End the chat: the goal is met, a person takes over, or there is nothing more to say.",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}}
OPENING = "(The support chat is open. Write your first message.)"


@dataclass
class CustomerTurn:
    text: str | None  # None: the customer is done
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""


class CustomerModel:
    def __init__(self, model):
        self.model = model  # an OpenAIModel (support.desk.assistant.model(...)) or anything with complete()

    def next_message(self, sim: SimulatedCustomer, seen: list[tuple[str, str]]) -> CustomerTurn:
        """`seen`: (who, text) of what the customer saw, who being "customer" or "desk", oldest first."""
        messages = [{"role": "system", "content": PROMPT.format(persona=sim.persona, goal=sim.goal)}]
        if not seen or seen[0][0] == "customer":
            messages.append({"role": "user", "content": OPENING})
        for who, text in seen:
            role = "assistant" if who == "customer" else "user"
            if messages[-1]["role"] == role:  # two desk messages in a row read as one
                messages[-1]["content"] += "\n\n" + text
            else:
                messages.append({"role": role, "content": text})
        if messages[-1]["role"] == "assistant":
            return CustomerTurn(None)  # the desk said nothing since: nothing to answer
        try:
            reply = self.model.complete(Transcript(messages), [END_TOOL], Observer())
        except ModelError as e:
            return CustomerTurn(None, e.prompt_tokens, e.completion_tokens, error=str(e))
        text = reply.content.strip()
        ended = any(c.name == "end_conversation" for c in reply.tool_calls) or DONE in text or not text
        return CustomerTurn(None if ended else text, reply.prompt_tokens, reply.completion_tokens)
