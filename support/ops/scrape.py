"""What /metrics answers: this process's counters (support/ops/metrics.py) and the desk's state read at
scrape time, and the endpoints (a site process's view, a worker's own port).

The desk's state (runs by status, approvals waiting, the queue) is read from the database and Redis when
/metrics is scraped, so every daphne reports the same values: read those with max(), not sum().
"""

from __future__ import annotations

import hmac
import logging

from django.conf import settings
from django.db.models import Count, Min
from django.http import HttpResponse
from django.utils import timezone
from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder

from support.models import Approval, Conversation, Run
from support.ops.sweeper import redis_client, sweeper_last_run

log = logging.getLogger(__name__)


# -- the desk's state, read at scrape time ----------------------------------------------------------

class DeskState:
    """Gauges read from the database and Redis on each scrape of a site process. A dependency that does not
    answer leaves its gauges out (and /readyz says why), rather than failing the whole scrape."""

    def collect(self):
        yield from self._database()
        yield from self._queue()

    def _database(self):
        try:
            by_status = dict(Run.objects.filter(status__in=Run.ACTIVE).values_list("status").annotate(n=Count("id")))
            oldest = Run.objects.filter(status=Run.QUEUED).aggregate(t=Min("heartbeat_at"))["t"]
            waiting = Approval.objects.filter(decided_at__isnull=True).aggregate(n=Count("id"), t=Min("requested_at"))
            pending, oldest_approval = waiting["n"], waiting["t"]
            attention = Conversation.objects.filter(status=Conversation.NEEDS_ATTENTION).count()
        except Exception as e:
            log.warning("metrics: the database did not answer: %s", type(e).__name__)
            return
        runs = GaugeMetricFamily("desk_runs", "Runs not yet stopped, by status.", labels=["status"])
        for status in Run.ACTIVE:
            runs.add_metric([status], by_status.get(status, 0))
        yield runs
        age = (timezone.now() - oldest).total_seconds() if oldest else 0.0
        yield GaugeMetricFamily("desk_oldest_queued_run_seconds",
                                "How long the oldest queued run has waited for a worker since it was last "
                                "sent (new, resumed or requeued; 0: none waits).", value=age)
        yield GaugeMetricFamily("desk_approvals_pending", "Approvals waiting for a person.", value=pending)
        age = (timezone.now() - oldest_approval).total_seconds() if oldest_approval else 0.0
        yield GaugeMetricFamily("desk_oldest_pending_approval_seconds",
                                "How long the oldest approval has waited for a person (0: none waits).", value=age)
        yield GaugeMetricFamily("desk_conversations_needing_attention",
                                "Conversations handed to a person and not yet taken.", value=attention)

    def _queue(self):
        try:
            client = redis_client(settings.CELERY_BROKER_URL)
            waiting, reserved = client.llen("celery"), client.hlen("unacked")
        except Exception as e:
            log.warning("metrics: Redis did not answer: %s", type(e).__name__)
            return
        queue = GaugeMetricFamily("desk_queue_messages", "Celery messages: waiting in the queue, or reserved by "
                                  "a worker and not yet acknowledged.", labels=["state"])
        queue.add_metric(["waiting"], waiting)
        queue.add_metric(["reserved"], reserved)
        yield queue
        last = sweeper_last_run(client)
        if last is not None:
            yield GaugeMetricFamily("desk_sweeper_last_run_timestamp_seconds", "When the sweeper (scheduled by "
                                    "the beat) last ran, as a Unix time: alert when it falls behind.", value=last)


class _ProcessCounters:
    """The default registry (this process's counters, CPU and memory) as one collector among others."""

    def collect(self):
        return REGISTRY.collect()


# What a site process's /metrics answers: its own counters and the desk's state, in one exposition.
_site = CollectorRegistry(auto_describe=False)
_site.register(_ProcessCounters())
_site.register(DeskState())


# -- the endpoints ------------------------------------------------------------------------------------

def metrics_view(request):
    """GET /metrics: this process's counters and the desk's state. With METRICS_TOKEN set, only for a
    scraper that sends it as a bearer token."""
    token = settings.METRICS_TOKEN
    if token:
        sent = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(sent.encode(), token.encode()):
            return HttpResponse("A bearer token is required.\n", status=401, content_type="text/plain",
                                headers={"WWW-Authenticate": "Bearer"})
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))  # Prometheus text or OpenMetrics
    return HttpResponse(encode(_site), content_type=content_type)


def serve_worker_metrics(host: str, port: int) -> None:
    """A worker's own endpoint (its counters and the process's CPU and memory), on a thread of its own.
    A port already taken is logged, not raised: a worker that cannot be scraped still works its runs."""
    try:
        start_http_server(port, addr=host)
    except OSError as e:
        log.error("worker metrics: cannot listen on %s:%s (%s); this worker is not scraped", host, port, e)
        return
    log.info("worker metrics on http://%s:%s/metrics", host, port)
