"""Operators' entry points of the job mechanism (the same functions the schedules call).

    PYTHONPATH=layers/core python -m switchboard.jobs show <job_id>
    PYTHONPATH=layers/core python -m switchboard.jobs resume <job_id>     # re-send its chunk; restarts a failed job
    PYTHONPATH=layers/core python -m switchboard.jobs sweep               # due purges + stalled jobs, as scheduled
    PYTHONPATH=layers/core python -m switchboard.jobs start <kind> <organization_id>   # a backfill (jobs.backfills)
    PYTHONPATH=layers/core python -m switchboard.jobs kinds               # the kinds `start` accepts

The environment is a function's (TABLE_NAME, JOBS_QUEUE_URL, MEDIA_BUCKET, …), as for `switchboard.events.redrive`.
"""

from __future__ import annotations

import argparse
import json

from switchboard.jobs import backfills, purge, service
from switchboard.store import get_store, keys

# The kinds an operator starts per organization: the backfills and the move of older webhook deliveries.
OPERATOR_KINDS = (*backfills.FUNCTIONS, "webhooks.move_legacy")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m switchboard.jobs")
    parser.add_argument("command", choices=("show", "resume", "sweep", "start", "kinds"))
    parser.add_argument("arguments", nargs="*", help="show/resume: <job_id>; start: <kind> <organization_id>")
    args = parser.parse_args(argv)
    if args.command == "kinds":
        print("\n".join(sorted(OPERATOR_KINDS)))
        return 0
    store = get_store()
    if args.command == "sweep":
        print(json.dumps({"started": purge.start_due_purges(store), "resumed": service.resume_stalled(store)}))
        return 0
    if args.command == "start":
        if len(args.arguments) != 2 or args.arguments[0] not in OPERATOR_KINDS:
            parser.error(f"start needs a kind ({', '.join(sorted(OPERATOR_KINDS))}) and an organization id")
        kind, org_id = args.arguments
        if store.get(keys.organization(org_id), consistent=True) is None:
            parser.error(f"no organization {org_id}")
        print(json.dumps({"job_id": service.start(store, kind, org_id)}))
        return 0
    if len(args.arguments) != 1:
        parser.error(f"{args.command} needs a job id")
    (job_id,) = args.arguments
    if args.command == "show":
        job = service.get_job(store, job_id)
        print(json.dumps(job, default=str, indent=2))
        return 0 if job else 1
    return 0 if service.resume(store, job_id) else 1


if __name__ == "__main__":
    raise SystemExit(main())
