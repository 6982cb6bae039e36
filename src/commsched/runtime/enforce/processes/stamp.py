"""``python -m commsched.runtime.enforce.processes.stamp LOG``: copy standard input to ``LOG``, each line
also to ``LOG.lines.jsonl`` with the wall-clock time it arrived.

The agent starts one beside every job process it starts, reading the job's standard output, in a
session of its own: when the agent dies the job keeps a reader for its output and goes on (a job
writing into a pipe nobody reads would stop, or die of ``SIGPIPE``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    log = Path(args[0])
    with open(log, "wb") as raw, open(log.with_name(log.name + ".lines.jsonl"), "w") as timed:
        for line in sys.stdin.buffer:
            now = time.time()
            raw.write(line)
            raw.flush()
            timed.write(json.dumps({"t": now, "line": line.decode(errors="replace").rstrip("\n")}) + "\n")
            timed.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
