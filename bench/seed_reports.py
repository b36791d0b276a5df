"""Seed a PostgreSQL database for the reports at scale: 200,000 conversations and 2 million messages.

`DATABASE_URL=postgres://... python bench/seed_reports.py [--conversations N] [--days D]` on a migrated database.
Rows are generated inside PostgreSQL (INSERT ... SELECT over generate_series), so nothing crosses the wire but
the statements: a minute or two, not hours. Over D days ending yesterday (the desk's time zone is UTC here), each
conversation gets 10 messages (customer and agent by turns, a person's reply in one in ten), one run, and by
its number: a language (8 in 10 English), a channel (1 in 7 e-mail), an outcome (resolved, waiting on the
customer, not resolved, handed over), a rating (1 in 5), an approval (1 in 10: approved, changed, rejected,
expired, automatic) and its refund. Everything is deterministic: the same N gives the same rows.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MESSAGES_PER_CONVERSATION = 10
CUSTOMERS = 20_000

# Each statement reads :base (the first conversation id) and :n, :days; "i" runs 0..n-1 for conversation base+i.
STEPS = [
    ("customers", """
        INSERT INTO support_customer (id, public_id, name, email)
        SELECT %(cbase)s + k, gen_random_uuid(), 'Customer ' || k, 'seed' || (%(cbase)s + k) || '@example.com'
        FROM generate_series(0, %(customers)s - 1) k"""),
    ("conversations", """
        INSERT INTO support_conversation (id, public_id, status, attention_reason, last_seq, created_at, updated_at,
                                          customer_id, language, order_scope, closed_at, closed_by_id,
                                          waiting_for, email_subject)
        SELECT %(base)s + i, gen_random_uuid(),
               CASE WHEN i %% 10 IN (3, 7) THEN 'needs_attention' ELSE 'open' END, '', 10, t.at, t.at,
               %(cbase)s + i %% %(customers)s,
               CASE i %% 10 WHEN 8 THEN 'de' WHEN 9 THEN 'fr' ELSE 'en' END, '',
               CASE WHEN i %% 10 IN (3, 7) THEN t.at + interval '2 hours' END,
               CASE WHEN i %% 10 IN (3, 7) THEN %(staff)s END, '', ''
        FROM generate_series(0, %(n)s - 1) i,
             LATERAL (SELECT date_trunc('day', now()) - interval '1 day' * (1 + i %% %(days)s)
                             + interval '1 second' * ((i * 7919) %% 86000) AS at) t"""),
    ("messages", """
        INSERT INTO support_message (seq, role, author, content, tool_call_id, created_at, author_user_id,
                                     conversation_id, channel)
        SELECT s, CASE WHEN s %% 2 = 1 THEN 'user' ELSE 'assistant' END,
               CASE WHEN s %% 2 = 1 THEN 'customer' WHEN s = 6 AND c.id %% 10 IN (3, 7) THEN 'staff'
                    ELSE 'agent' END,
               'Seeded message ' || s, '', c.created_at + interval '30 seconds' * s,
               CASE WHEN s = 6 AND c.id %% 10 IN (3, 7) THEN %(staff)s END,
               c.id, CASE WHEN c.id %% 7 = 0 THEN 'email' ELSE 'widget' END
        FROM support_conversation c, generate_series(1, 10) s
        WHERE c.id >= %(base)s"""),
    ("runs", """
        INSERT INTO support_run (public_id, status, stop_reason, outcome, outcome_summary, summary, detail, attempts,
                                 lease, turns, prompt_tokens, completion_tokens, cost_usd, created_at, finished_at,
                                 conversation_id, trace_parent)
        SELECT gen_random_uuid(), 'stopped',
               CASE c.id %% 10 WHEN 3 THEN 'escalated' WHEN 7 THEN 'turn_limit' ELSE 'answered' END,
               CASE WHEN c.id %% 10 IN (3, 7) THEN 'handed_to_person' WHEN c.id %% 10 IN (1, 5) THEN 'waiting_on_customer'
                    WHEN c.id %% 10 = 9 THEN 'not_resolved' ELSE 'resolved' END,
               '', '', '', 1, '', 2, 1200, 200, 0.0123, c.created_at + interval '20 seconds',
               c.created_at + interval '290 seconds', c.id, ''
        FROM support_conversation c WHERE c.id >= %(base)s"""),
    ("ratings", """
        INSERT INTO support_rating (score, comment, occasion, rated_seq, created_at, updated_at, conversation_id)
        SELECT 1 + (c.id / 5) %% 5, '', CASE WHEN c.id %% 10 IN (3, 7) THEN 'closed' ELSE 'resolved' END, 10,
               c.created_at + interval '10 minutes', c.created_at + interval '10 minutes', c.id
        FROM support_conversation c WHERE c.id >= %(base)s AND c.id %% 5 = 0"""),
    ("tool calls", """
        INSERT INTO support_toolcall (call_id, name, arguments, status, idempotency_key, attempts, result, created_at,
                                      updated_at, run_id)
        SELECT 'call_' || r.id, 'issue_refund', '{"amount": "20.00"}', 'executed', 'seed:' || r.id, 1, '',
               r.created_at, r.created_at, r.id
        FROM support_run r WHERE r.conversation_id >= %(base)s AND r.conversation_id %% 10 = 4"""),
    ("approvals", """
        INSERT INTO support_approval (public_id, requested_at, requested_arguments, decided_at, decision, reason,
                                      executed_arguments, decided_by_id, run_id, tool_call_id, expires_at,
                                      not_run_reason, decided_via, first_approved_via)
        SELECT gen_random_uuid(), t.created_at, '{"amount": "20.00"}',
               CASE WHEN k = 3 THEN NULL ELSE t.created_at + interval '1 second' * (30 + (t.id * 37) %% 3600) END,
               CASE k WHEN 2 THEN 'rejected' WHEN 3 THEN 'expired' ELSE 'approved' END, '',
               CASE k WHEN 0 THEN '{"amount": "20.00"}'::jsonb WHEN 1 THEN '{"amount": "15.00"}'::jsonb
                      WHEN 4 THEN '{"amount": "20.00"}'::jsonb END,
               CASE WHEN k IN (0, 1, 2) THEN %(staff)s END, t.run_id, t.id, t.created_at + interval '1 day', '',
               CASE k WHEN 0 THEN 'console' WHEN 1 THEN 'slack' WHEN 2 THEN 'email' ELSE '' END, ''
        FROM support_toolcall t, LATERAL (SELECT (t.run_id / 10) %% 5 AS k) kk
        WHERE t.idempotency_key LIKE 'seed:%%'"""),
    ("refunds", """
        INSERT INTO support_shopeffect (public_id, kind, key, backend, order_number, amount, text, shop_id, reference,
                                        created_at, conversation_id)
        SELECT gen_random_uuid(), 'refund', t.idempotency_key, 'demo', 'SU-1',
               (a.executed_arguments ->> 'amount')::numeric, '', t.idempotency_key, '', a.decided_at, r.conversation_id
        FROM support_approval a JOIN support_toolcall t ON t.id = a.tool_call_id JOIN support_run r ON r.id = a.run_id
        WHERE a.decision = 'approved' AND t.idempotency_key LIKE 'seed:%%'"""),
]


def seed(conversations: int, days: int) -> list[tuple[str, int, float]]:
    """Runs each step; returns (step, rows, seconds)."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    staff, _ = get_user_model().objects.get_or_create(username="seed-lead", defaults={"is_staff": True})
    done = []
    with connection.cursor() as cursor, transaction.atomic():
        params = {"n": conversations, "days": days, "customers": CUSTOMERS, "staff": staff.pk,
                  "base": _next_id(cursor, "support_conversation"), "cbase": _next_id(cursor, "support_customer")}
        for name, sql in STEPS:
            started = time.perf_counter()
            cursor.execute(sql, params)
            done.append((name, cursor.rowcount, time.perf_counter() - started))
        for table in ("support_customer", "support_conversation"):
            cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
    with connection.cursor() as cursor:
        started = time.perf_counter()
        cursor.execute("ANALYZE")
        done.append(("analyze", 0, time.perf_counter() - started))
    return done


def _next_id(cursor, table: str) -> int:
    cursor.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}")
    return cursor.fetchone()[0]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200_000)
    parser.add_argument("--days", type=int, default=90)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    os.environ.setdefault("DB_STATEMENT_TIMEOUT_MS", "0")  # one INSERT ... SELECT writes 2 million rows
    import django

    django.setup()
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit("seed_reports needs PostgreSQL (DATABASE_URL=postgres://...)")
    started = time.perf_counter()
    for name, rows, seconds in seed(args.conversations, args.days):
        print(f"{name:14} {rows:>10,} rows {seconds:8.1f} s")
    print(f"{'in all':14} {'':>10}      {time.perf_counter() - started:8.1f} s")


if __name__ == "__main__":
    main()
