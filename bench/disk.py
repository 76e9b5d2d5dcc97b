"""How long the disk takes to make a small write durable, measured where the stores write, all through the run.

Every commit at ``synchronous=FULL`` waits for at least one fsync, so the
fsync time is the floor under every durable append rate. Printed beside the
table (before, between rounds, after), it tells a reader whether the machine
was steady while the stores were measured, and by how much it was not.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from rounds import percentile

BLOCK = b"x" * 4096


@dataclass(frozen=True)
class Probe:
    label: str
    at: float  # seconds since the run started
    ms: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.ms)

    @property
    def p90(self) -> float:
        return percentile(self.ms, 0.9)


@dataclass
class Disk:
    """Probes of ``count`` fsyncs each, in ``folder`` (the folder the stores' files are in)."""

    folder: Path
    count: int
    started: float = field(default_factory=time.perf_counter)
    probes: list[Probe] = field(default_factory=list)

    def probe(self, label: str) -> Probe:
        """``count`` times: append 4 KiB to a file and fsync it (as a WAL commit appends a frame and syncs)."""
        path = self.folder / "fsync-probe"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        times: list[float] = []
        try:
            for _ in range(self.count):
                os.write(fd, BLOCK)
                start = time.perf_counter()
                os.fsync(fd)
                times.append((time.perf_counter() - start) * 1000)
        finally:
            os.close(fd)
            path.unlink(missing_ok=True)
        found = Probe(label, time.perf_counter() - self.started, times)
        self.probes.append(found)
        return found

    def during(self) -> list[Probe]:
        return [p for p in self.probes if p.label not in ("before", "after")]

    def drift(self) -> float:
        """max/min of the probes' medians."""
        medians = [p.median for p in self.probes if p.median > 0]
        return max(medians) / min(medians) if medians else 1.0

    def summary(self) -> str:
        def one(p: Probe) -> str:
            return f"median {p.median:.2f} ms, p90 {p.p90:.2f} ms"

        parts = []
        for p in self.probes:
            if p.label == "before":
                parts.append(f"before {one(p)}")
        during = self.during()
        if during:
            medians = [p.median for p in during]
            slow = max(during, key=lambda p: p.median)
            fast = min(during, key=lambda p: p.median)
            parts.append(
                f"between rounds ({len(during)} probes) medians {statistics.median(medians):.2f} ms typical, "
                f"{fast.median:.2f} ms fastest ({fast.label}) to {slow.median:.2f} ms slowest ({slow.label})"
            )
        for p in self.probes:
            if p.label == "after":
                parts.append(f"after {one(p)}")
        return f"Disk: fsync of a 4 KiB append in the bench's folder, {self.count} per probe: " + "; ".join(parts) + "."
