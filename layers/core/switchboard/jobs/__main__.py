"""Operators' entry points of the job mechanism (the same functions the schedules call).

    PYTHONPATH=layers/core python -m switchboard.jobs show <job_id>
    PYTHONPATH=layers/core python -m switchboard.jobs resume <job_id>     # re-send its chunk; restarts a failed job
    PYTHONPATH=layers/core python -m switchboard.jobs sweep               # due purges + stalled jobs, as scheduled

The environment is a function's (TABLE_NAME, JOBS_QUEUE_URL, MEDIA_BUCKET, …), as for `switchboard.events.redrive`.
"""

from __future__ import annotations

import argparse
import json

from switchboard.jobs import purge, service
from switchboard.store import get_store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m switchboard.jobs")
    parser.add_argument("command", choices=("show", "resume", "sweep"))
    parser.add_argument("job_id", nargs="?")
    args = parser.parse_args(argv)
    store = get_store()
    if args.command == "sweep":
        print(json.dumps({"started": purge.start_due_purges(store), "resumed": service.resume_stalled(store)}))
        return 0
    if not args.job_id:
        parser.error(f"{args.command} needs a job id")
    if args.command == "show":
        job = service.get_job(store, args.job_id)
        print(json.dumps(job, default=str, indent=2))
        return 0 if job else 1
    return 0 if service.resume(store, args.job_id) else 1


if __name__ == "__main__":
    raise SystemExit(main())
