"""Receipts by what a retention pass was doing when they were in flight, from a
``bench/storage.py --soak-keep DIR --soak-log-level debug`` folder (its posts.json and
server.log). Run: ``python bench/soak_phases.py DIR [DIR ...]``.

A pass of ``serve`` logs, in order: its run trims' steps ("trim of N runs", the first one
about one step after they began), "run retention: …" when they end, "retention pass
started", its segments' trims, its vacuum steps, and "retention pass: …". A POST is
counted in the first phase its send-to-acknowledgement span overlaps, else "between".
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import servers
import storage_soak

STEP_S = 0.03  # a run step's length: the first step's line comes this long after they begin


def spans(server_log: Path) -> list[tuple[str, float, float]]:
    """(phase, start, end) in epoch seconds, from the retention lines of the log."""
    out: list[tuple[str, float, float]] = []
    phase: tuple[str, float] | None = None
    for entry in storage_soak.log_lines(server_log.read_text(errors="replace")):
        t, message = entry["t"], str(entry.get("message", ""))
        if phase is None and message.startswith("retention step trim of") and "runs" in message:
            phase = ("run trims", t - STEP_S)
        elif message.startswith("run retention:") and phase is not None:
            out.append((phase[0], phase[1], t))
            phase = None
        elif message.startswith("retention pass started"):
            phase = ("segments", t)
        elif "vacuum of" in message and phase is not None and phase[0] == "segments":
            out.append((phase[0], phase[1], t - STEP_S))
            phase = ("vacuum", t - STEP_S)
        elif message.startswith("retention pass:") and phase is not None:
            out.append((phase[0], phase[1], t))
            phase = None
    return out


def by_phase(keep: Path) -> dict[str, list[float]]:
    phases = spans(keep / "server.log")
    out: dict[str, list[float]] = {}
    for post in json.loads((keep / "posts.json").read_text()):
        if post["status"] != 202:
            continue
        sent, acked = post["sent"], post["acked"]
        name = next((p for p, b, e in phases if sent < e and acked > b), "between")
        out.setdefault(name, []).append((acked - sent) * 1000)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("keep", nargs="+", type=Path)
    for keep in p.parse_args().keep:
        print(keep)
        for name, ms in sorted(by_phase(keep).items()):
            p50, p90, p99 = (servers.percentile(ms, q) for q in (50, 90, 99))
            print(
                f"  {name:10} POSTs {len(ms):6,}  p50 {p50:5.1f}  p90 {p90:5.1f}  p99 {p99:5.1f} ms"
            )


if __name__ == "__main__":
    main()
