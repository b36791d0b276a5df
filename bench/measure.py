"""What the benchmarks measure with and how they print it: CPU and memory of process trees, percentiles and
medians, markdown tables."""

from __future__ import annotations

import os
import statistics
import time


def process_tree_rss(pid: int) -> int:
    """Resident memory of a process and its children, in bytes (0 once it is gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by a process, its live descendants, and the children it (or
    they) reaped: a backend that exits between two readings still counts, through its parent."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return total


class CpuMeter:
    """CPU used by named processes (each with its descendants) between start() and stop()."""

    def __init__(self, roots: dict[str, int]):
        self.roots = {name: pid for name, pid in roots.items() if pid}
        self.used: dict[str, float] = {}

    SELF = "bench client"  # this process alone: its children (the servers it started) are measured apart

    def _read(self, name: str, pid: int) -> float:
        if name == self.SELF:
            t = os.times()
            return t.user + t.system
        return tree_cpu(pid)

    def start(self) -> "CpuMeter":
        self._t0, self._before = time.monotonic(), {n: self._read(n, p) for n, p in self.roots.items()}
        return self

    def stop(self) -> dict[str, float]:
        self.wall = time.monotonic() - self._t0
        self.used = {n: self._read(n, p) - self._before[n] for n, p in self.roots.items()}
        return self.used


class RssSampler:
    """Samples a process tree's RSS in a thread every `interval` s; `.peak` in bytes."""

    def __init__(self, pid: int, interval: float = 0.2):
        import threading

        self.pid, self.interval, self.peak = pid, interval, process_tree_rss(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, process_tree_rss(self.pid))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(2)
        self.peak = max(self.peak, process_tree_rss(self.pid))
        return self.peak


def cpu_table(meters: list[tuple[str, "CpuMeter", int]], unit: str) -> str:
    """One row per measured load: CPU ms per `unit` by process, the total, and cores busy on average."""
    names = []
    for _, m, _ in meters:
        names += [n for n in m.used if n not in names]
    rows = []
    for label, m, count in meters:
        total = sum(m.used.values())
        rows.append([label, count] + [f"{m.used.get(n, 0) * 1000 / max(count, 1):.1f}" for n in names]
                    + [f"{total * 1000 / max(count, 1):.1f}", f"{total / m.wall:.2f}" if m.wall else "-"])
    return md_table(["load", f"{unit}s"] + [f"{n} CPU ms/{unit}" for n in names]
                    + [f"total CPU ms/{unit}", "cores busy (avg)"], rows)


def pct(values, p: float) -> float:
    """The p-th percentile (0-100), linear interpolation between closest ranks (numpy's default)."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def med(values) -> float:
    return statistics.median(values) if values else float("nan")


def mmm(values, fmt: str = "{:.2f}") -> str:
    """'median (min-max)'."""
    if not values:
        return "-"
    return f"{fmt.format(med(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def md_table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(c) for c in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(cells[0]), "| " + " | ".join("-" * w for w in widths) + " |", *map(line, cells[1:])])
