"""Prompt caching: the share of prompt tokens a provider serves from its prefix cache, and the cost per ticket
with and without caching, on the built-in stand-in (which caches like OpenAI: standin/cache.py).

The real desk in this process on a throwaway SQLite database seeded with the demo shop: each customer message is
posted with services.conversation_post_message and its run executed with runner.run_execute (no queue hop), the
customer's time zone set so each run tells a new local time; the desk's clock moves 7 minutes between turns.
Conversations: three turns, and forty, each on a cold provider (the stand-in's cache reset: it has seen nothing of
the desk) and on a warm one (another customer's conversation ran just before, as on any desk in use: the tools and
the prompt are in the provider's cache). Numbers are the stand-in's usage (prompt and cached tokens) and the cost at
the stand-in model's MODEL_PRICES entry (input, output, cached input).

`python bench/prompt_cache.py`
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3"
os.environ.setdefault("AGENT_MAX_COST_USD", "0")
os.environ.setdefault("CONVERSATION_MAX_STEPS_PER_DAY", "0")
os.environ.setdefault("CONVERSATION_MAX_TOKENS_PER_DAY", "0")
for _limit in ("MESSAGES_PER_MINUTE", "CUSTOMER_MESSAGES_PER_MINUTE", "ADDRESS_MESSAGES_PER_MINUTE"):
    os.environ.setdefault(_limit, "1000")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from support.customers import notify  # noqa: E402
from support.desk import assistant, queue, runner, services  # noqa: E402
from support.models import Customer  # noqa: E402

THREE = ["Where is my parcel for order SU-41207? Tracking says delivered but nothing arrived.",
         "It is still not here, can you check again?", "Thank you, that helps."]


class Clock(datetime):
    at = datetime(2024, 5, 14, 9, 0, tzinfo=timezone.utc)

    @classmethod
    def now(cls, tz=None):
        return cls.at if tz is None else cls.at.astimezone(tz)


def conversation(texts: list[str], standin, warm: bool = False) -> dict:
    standin.reset()
    if warm:
        talk(["Where is my order SU-41210?"], "maya@example.com")
    seen = len(standin.requests())
    talk(texts, "maya@example.com")
    served = [e for e in standin.requests()[seen:] if e["status"] == 200]
    return {"calls": len(served), "prompt": sum(e["prompt_tokens"] for e in served),
            "cached": sum(e["cached_tokens"] for e in served),
            "completion": sum(e["completion_tokens"] for e in served)}


def talk(texts: list[str], email: str) -> None:
    queued: list = []
    queue.run_agent = lambda run_id, **ids: queued.append(run_id)
    conv = services.conversation_start(customer=Customer.objects.get(email=email))
    notify.set_time_zone(conv, "Europe/Berlin")
    for text in texts:
        services.conversation_post_message(conversation=conv, text=text)
        while queued:
            runner.run_execute(queued.pop(0))
        Clock.at += timedelta(minutes=7)


def cost(n: dict, price: tuple, cached: bool) -> float:
    hit = n["cached"] if cached else 0
    return ((n["prompt"] - hit) * price[0] + hit * price[2] + n["completion"] * price[1]) / 1_000_000


def main() -> None:
    call_command("migrate", verbosity=0)
    call_command("seed_demo", stdout=open(os.devnull, "w"))
    assistant.datetime = Clock
    standin = assistant.shared_model() and assistant._standin
    price = settings.MODEL_PRICES[settings.MODEL_NAME]
    forty = [THREE[0]] + [f"Any news on SU-41207? (asking again, {i})" for i in range(38)] + [THREE[2]]
    for name, texts in (("three turns", THREE), ("forty turns", forty)):
        for warm in (False, True):
            n = conversation(texts, standin, warm)
            print(f"{name}, {'warm' if warm else 'cold'} provider: {n['calls']} model calls, {n['prompt']} prompt "
                  f"tokens, {n['cached']} cached "
                  f"({100 * n['cached'] / n['prompt']:.1f}%); cost ${cost(n, price, False):.5f} without caching, "
                  f"${cost(n, price, True):.5f} with")


if __name__ == "__main__":
    main()
