"""Independent reads at once: one reply asking for four read-only calls of 200 ms each.

(a) the loop alone (no database): four tools that each sleep 200 ms, marked read-only (made at the same
    time) and not (made one after another), on a scripted two-reply run;
(b) the desk's path: runner.run_execute on the real database with the shop's own read tools (get_order x2,
    track_parcel, search_policy), each slowed by 200 ms as a remote shop API would be, read-only as they
    are and with that turned off.
Wall time of the whole run (the tool phase dominates); medians over repeats.

`python bench/reads.py [--quick]`
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import django_setup, section_main  # noqa: E402
from bench.measure import md_table, med  # noqa: E402

DELAY = 0.2


def _scripted(calls):
    from tests.fake_model import ScriptedModel, answer, reply

    return ScriptedModel(reply(calls=calls), *answer("Found them."))


def loop_alone(read_only: bool) -> float:
    from support.agent.loop import run_loop
    from support.agent.tools import Tool, ToolContext
    from support.agent.types import Transcript
    from tests.fake_model import call

    def slow(ctx, order_id):
        time.sleep(DELAY)
        return {"order_id": order_id}

    schema = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
    tools = [Tool("get_order", "x", schema, slow, read_only=read_only)]
    t = Transcript([{"role": "system", "content": "agent"}, {"role": "user", "content": "four orders"}])
    calls = [call("get_order", {"order_id": f"SU-{n}"}) for n in range(4)]
    t0 = time.perf_counter()
    run_loop(t, model=_scripted(calls), tools=tools, ctx=ToolContext(customer_id=1, run_id="r"))
    return time.perf_counter() - t0


def desk_path(demo_customer, read_only: bool) -> float:
    from support.desk import assistant, runner, services
    from tests.fake_model import call

    def slowed(tool):
        def fn(ctx, **arguments):
            time.sleep(DELAY)
            return tool.fn(ctx, **arguments)
        return replace(tool, fn=fn, read_only=read_only and tool.read_only)

    calls = [call("get_order", {"order_id": "SU-41207"}), call("get_order", {"order_id": "SU-41310"}),
             call("track_parcel", {"tracking": "HL40120771"}), call("search_policy", {"query": "missing parcel"})]
    queued = []
    with mock.patch.object(assistant, "shared_model", lambda: _scripted(calls)), \
            mock.patch.object(assistant, "tools", lambda: [slowed(t) for t in assistant.SHOP_TOOLS]), \
            mock.patch("support.desk.queue.run_agent", lambda run_id, **ids: queued.append(run_id)):
        conversation = services.conversation_start(customer=demo_customer)
        services.conversation_post_message(conversation=conversation, text="Where are SU-41207 and SU-41310?")
        t0 = time.perf_counter()
        assert runner.run_execute(queued.pop()) == "answered"
        return time.perf_counter() - t0


def run(stack, quick: bool) -> dict:
    database_url = stack.database("bench_reads")
    django_setup(stack, database_url)
    from support.models import Customer

    maya = Customer.objects.get(email="maya@example.com")
    repeats = 3 if quick else 7
    rows, numbers = [], {}
    for label, measure in (("loop alone, 4 reads of 200 ms", loop_alone),
                           ("desk path (real tools, database), 4 reads slowed by 200 ms",
                            lambda ro: desk_path(maya, ro))):
        together = med([measure(True) for _ in range(repeats)]) * 1000
        in_turn = med([measure(False) for _ in range(repeats)]) * 1000
        numbers[label] = {"together_ms": together, "one_after_another_ms": in_turn}
        rows.append([label, f"{together:.0f}", f"{in_turn:.0f}", f"{in_turn / together:.1f}×"])
    markdown = "\n".join([
        "## Independent reads at once",
        "",
        f"One reply asks for four read-only calls of {DELAY * 1000:.0f} ms each, then the run answers; wall ms "
        f"of the whole run, median of {repeats}. Results are appended in the order of the calls either way.",
        "",
        md_table(["path", "reads at once, ms", "one after another, ms", "speed-up"], rows),
    ])
    return {"name": "reads", "markdown": markdown, "numbers": numbers}


if __name__ == "__main__":
    section_main(run)
