"""The languages the desk speaks to customers: which ones (settings.LANGUAGES), the customer's choice kept
on the conversation, the desk's fixed texts written in it, and the line that tells the model.

The fixed texts (hand-over notices, a person joining) are saved as messages, so they are translated once,
when they are written, in the conversation's language: the customer and the model read the same words.
"""

from __future__ import annotations

from django.conf import settings
from django.utils import translation

from support.profiles import selectors


def supported() -> list[str]:
    return [code for code, _ in settings.LANGUAGES]


def offered() -> list[str]:
    """The languages the shop's profile offers that the desk speaks (all of them if it names none of those)."""
    return [code for code in selectors.live().languages if code in supported()] or supported()


def default() -> str:
    """The shop's first language: a German shop's e-mail to a customer who never chose is German."""
    return offered()[0]


def language_code(raw) -> str | None:
    """A supported language for a browser's or a shop's tag ("de", "de-AT", "DE_ch"), or None."""
    if not isinstance(raw, str) or not 1 <= len(raw) <= 35:
        return None
    base = raw.strip().replace("_", "-").split("-")[0].lower()
    return base if base in supported() else None


def of(conversation) -> str:
    return language_code(getattr(conversation, "language", None)) or default()


def say(conversation, text, **values) -> str:
    """`text` (a gettext_lazy string, with %(name)s placeholders filled from `values`) in the conversation's
    language."""
    with translation.override(of(conversation)):
        return str(text) % values if values else str(text)


def name(code: str) -> str:
    """The language's English name, as the model is told it."""
    return translation.get_language_info(code)["name"]


def model_line(conversation) -> dict:
    """What the model reads, after the system prompt, about the customer's language."""
    code = of(conversation)
    return {"role": "system", "content": f"The customer's language is {name(code)} ({code}). Write every "
            f"answer to the customer in {name(code)}, whatever language the tools, policies and notes are in."}


def with_model_line(history: list[dict], conversation) -> list[dict]:
    """The history with the language line after the leading system message(s). Not saved: it is read from
    the conversation for every run, so a language the customer changes applies from their next message."""
    at = next((i for i, m in enumerate(history) if m.get("role") != "system"), len(history))
    return [*history[:at], model_line(conversation), *history[at:]]
