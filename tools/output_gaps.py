"""How long a command is silent: run it with stdout and stderr piped (as in a CI log), time every
line it prints, and report the time to the first line, the longest silence between two lines
and the total (issue 28: `make demo` on a fresh cache shows progress within 5 s of starting and
at least every 10 s after).

    MEMCLAIM_CACHE=$(mktemp -d) python tools/output_gaps.py -- python -m memclaim.cli.main demo --out /tmp/d

prints one line per output line (seconds since start, the stream, the text) with ``--echo``, then
a summary; ``--json FILE`` writes the timings.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time


def run(argv: list[str], echo: bool = False) -> dict:
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
    )
    lines: list[tuple[float, str, str]] = []
    lock = threading.Lock()

    def pump(stream, name):
        for line in stream:
            t = time.monotonic() - t0
            with lock:
                lines.append((t, name, line.rstrip("\n")))
                if echo:
                    print(f"{t:8.1f}s {name}: {line.rstrip()}", flush=True)

    threads = [
        threading.Thread(target=pump, args=(proc.stdout, "out")),
        threading.Thread(target=pump, args=(proc.stderr, "err")),
    ]
    for th in threads:
        th.start()
    rc = proc.wait()
    for th in threads:
        th.join()
    total = time.monotonic() - t0
    times = sorted(t for t, _, _ in lines)
    gaps = [b - a for a, b in zip([0.0] + times, times + [total])]
    worst = max(range(len(gaps)), key=gaps.__getitem__) if gaps else None
    return {
        "argv": argv,
        "returncode": rc,
        "lines": len(lines),
        "first_line_s": times[0] if times else None,
        "longest_silence_s": gaps[worst] if gaps else total,
        "longest_silence_after_s": ([0.0] + times)[worst] if gaps else 0.0,
        "total_s": total,
        "timeline": [{"t": round(t, 2), "stream": s, "text": x} for t, s, x in sorted(lines)],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--echo", action="store_true", help="print each line with its time as it comes")
    ap.add_argument("--json", default=None, help="write the timings to this file")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    a = ap.parse_args()
    argv = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not argv:
        ap.error("give the command after --")
    res = run(argv, echo=a.echo)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)
    print(
        f"exit {res['returncode']}; {res['lines']} lines; first after {res['first_line_s']:.1f} s; longest silence "
        f"{res['longest_silence_s']:.1f} s (after {res['longest_silence_after_s']:.1f} s); total {res['total_s']:.1f} s"
    )
    return 0 if res["returncode"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
