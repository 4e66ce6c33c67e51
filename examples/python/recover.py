"""Recovery worker: finishes Slack events that nobody is working on any more.

Slack does not re-send an event it got a 200 for. So when a receiver acknowledged an event
and then died (kill -9, out of memory, a deploy) the event would reach nobody; and a
transient failure (Retry) needs someone to try again once the retry is due. claimd lists
both with ListOrphaned: PROCESSING receipts whose lease ran out (LEASE_EXPIRED) and
RETRY_WAIT receipts that are due (RETRY_DUE). For each, this worker calls Claim with the
receipt's key and stored fingerprint; only the caller told CLAIMED (a takeover, attempt + 1)
redoes the work, from receipt.recovery_payload (the original body), exactly as the receiver
does (work.run_claimed), and Completes. Run any number of them: claimd lets one win.

    python recover.py --once            # one pass, print a JSON summary, exit
    python recover.py --interval 10     # forever, a pass every 10 s (SIGTERM stops it)

Flags and environment are those of receiver.py (CLAIMD_ADDR, CLAIMD_API_KEY, REPLIES_DB,
...), plus --overdue-by: only take receipts due at least that long ago, to leave a
receiver's own Slack retries a head start.
"""

import argparse
import collections
import json
import logging
import os
import signal
import sys
import threading

import claimd_client  # first: makes the claimd package importable
import work
from claimd import ClaimdError, Lease, OrphanReason

log = logging.getLogger("recover")


def recover_once(claims, args, worker):
    """One pass over every page of orphans; returns a Counter of outcomes."""
    counts = collections.Counter()
    page_token = ""
    while True:
        page = claims.list_orphaned(args.namespace, page_size=args.page_size,
                                    page_token=page_token, overdue_by=args.overdue_by)
        for orphan in page.orphans:
            key, reason = orphan.receipt.key, OrphanReason(orphan.reason).name
            claim = claims.claim(args.namespace, key, orphan.receipt.fingerprint,
                                 lease=args.lease, timeout=5.0)
            if not isinstance(claim, Lease):
                log.info("%s (%s): %s, someone else has it", key, reason, claim.decision.name)
                counts["skipped"] += 1
                continue
            log.info("%s (%s): CLAIMED, attempt %d, redoing the work", key, reason,
                     claim.attempt)
            outcome = work.run_claimed(claim, claim.receipt.recovery_payload, args, worker)
            counts[outcome] += 1
        page_token = page.next_page_token
        if not page_token:
            return counts


def main(argv=None):
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(description="claimd recovery worker for Slack events")
    parser.add_argument("--once", action="store_true",
                        help="one pass, then print a JSON summary of outcomes and exit")
    parser.add_argument("--interval", type=float, default=10.0,
                        help="seconds between passes (default 10)")
    parser.add_argument("--overdue-by", type=float, default=None,
                        help="only receipts due at least this many seconds ago")
    parser.add_argument("--page-size", type=int, default=100)
    claimd_client.add_arguments(parser)
    work.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.lease < 1:
        parser.error("--lease must be at least 1 second (claimd's minimum)")
    claims = claimd_client.connect(args)
    worker = f"recover {os.getpid()}"
    work.connect_db(args.db).close()

    if args.once:
        print(json.dumps(recover_once(claims, args, worker)), flush=True)
        return 0
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    log.info("recovering namespace %s at %s every %gs", args.namespace, args.claimd,
             args.interval)
    while not stopping.is_set():
        try:
            counts = recover_once(claims, args, worker)
            if counts:
                log.info("pass done: %s", dict(counts))
        except ClaimdError as error:
            log.error("pass failed: %s; trying again next pass", error.code.name)
        stopping.wait(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
