"""The work done for one Slack event, and how a claimed event is run and settled.

The work is a fake "post a reply to the channel": it appends a row to a SQLite table
(`replies`) standing in for Slack's chat.postMessage. The table deliberately has NO unique
constraint, exactly like a channel: posting twice shows up as two rows, so the tests can
count replies. A configurable "thinking" time (WORK_SECONDS, think of an LLM call) comes
first, which is what makes a handler slower than Slack's three seconds.

`run_claimed` is shared by receiver.py (a fresh claim) and recover.py (a takeover). Both
hand it the `claimd.Lease` that Claim returned, which heartbeats every lease/3 in the
background from the moment it was claimed (the `claimd` package, clients/python), and:

1. it works, stopping early once `lease.lost` is set (someone else took the work over);
2. right before the post, `lease.checkpoint(b"posting")`, a synchronous Heartbeat that
   stores the checkpoint: it fails with ABORTED if someone else took over (then nothing
   is posted) and renews the lease so the post runs inside it;
3. post, then Complete with {"posted": true, "channel": ..., "ts": ...}, replayed by
   claimd to every later delivery.

A holder that dies between the post and Complete leaves the checkpoint "posting": whoever
takes over looks for the reply first (with Slack: the bot's reply in the thread, found by
the event id in its message metadata) and does not post it again.

DEMO SWITCHES, so the tests can make the work fail (remove them in a real app): event text
containing "fail-transient" fails with a transient error on the first attempt (Retry),
"fail-permanent" fails for good (Quarantine), "crash-after-post" kills the process right
after the post on the first attempt (as kill -9 would).
"""

import hashlib
import json
import logging
import os
import sqlite3
import time
import traceback

import claimd_client  # noqa: F401  (first: makes the claimd package importable)
from claimd import ClaimdError, Lease

log = logging.getLogger("work")
POSTING = b"posting"


class LeaseLost(Exception):
    """claimd answered ABORTED: another holder took the work over. Stop, settle nothing."""


class TransientError(Exception):
    """The work may succeed later (Slack 5xx, a timeout): Retry after a backoff."""

    def __init__(self, message, retry_after=None):
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(Exception):
    """The event can never be handled (malformed, poison): Quarantine it."""


def add_arguments(parser):
    """The flags receiver.py and recover.py share for the work itself."""
    parser.add_argument("--db", default=os.environ.get("REPLIES_DB", "replies.db"),
                        help="SQLite file the fake replies are posted to (env REPLIES_DB)")
    parser.add_argument("--work-seconds", type=float,
                        default=float(os.environ.get("WORK_SECONDS", "1")),
                        help="artificial work time before the post (env WORK_SECONDS)")


def connect_db(path):
    """Opens the replies table, creating it on first use. One connection per call: sqlite3
    connections are not shared between threads."""
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS replies ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL, channel TEXT NOT NULL,"
        " thread_ts TEXT, text TEXT NOT NULL, attempt INTEGER NOT NULL,"
        " posted_by TEXT NOT NULL, posted_at REAL NOT NULL)"  # no UNIQUE, on purpose
    )
    return db


def parse_event(body):
    """The event_callback envelope of a raw body; PermanentError if it is not one we can
    answer (then no retry will ever help)."""
    try:
        envelope = json.loads(body)
    except ValueError:
        raise PermanentError("malformed event: body is not JSON") from None
    event = envelope.get("event") if isinstance(envelope, dict) else None
    if not isinstance(event, dict) or not isinstance(envelope.get("event_id"), str):
        raise PermanentError("malformed event: no event or event_id")
    if not isinstance(event.get("channel"), str) or not isinstance(event.get("text", ""), str):
        raise PermanentError("malformed event: no channel")
    return envelope


def post_reply(lease, envelope, args, worker):
    """Does the work for a claimed event under `lease`; returns the response to store."""
    event_id, event = envelope["event_id"], envelope["event"]
    if event.get("bot_id") or event.get("subtype") == "bot_message":
        return {"posted": False, "reason": "bot message"}  # never answer a bot: no loops
    text = event.get("text", "")
    if "fail-permanent" in text:
        raise PermanentError("demo switch fail-permanent: this event can never be answered")
    if "fail-transient" in text and lease.attempt == 1:
        raise TransientError("demo switch fail-transient: first attempt fails")

    deadline = time.monotonic() + args.work_seconds  # "thinking": slow on purpose
    while time.monotonic() < deadline:
        if lease.lost.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
            raise LeaseLost("lease lost while working")

    db = connect_db(args.db)
    try:
        if lease.receipt.checkpoint == POSTING:
            # The previous holder died between the post and Complete: did the post land?
            row = db.execute("SELECT channel, posted_at FROM replies WHERE event_id = ?"
                             " ORDER BY id LIMIT 1", (event_id,)).fetchone()
            if row:
                log.info("reply to %s was already posted by an earlier attempt", event_id)
                return {"posted": True, "channel": row[0], "ts": f"{row[1]:.6f}"}
        try:
            lease.checkpoint(POSTING)  # the last check before the side effect
        except ClaimdError as error:
            if lease.lost.is_set():
                raise LeaseLost(error.code.name) from None
            # Cannot tell whether we still hold it: do not post.
            raise TransientError(f"could not renew the lease: {error.code.name}") from None
        posted_at = time.time()
        db.execute(
            "INSERT INTO replies (event_id, channel, thread_ts, text, attempt, posted_by,"
            " posted_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (event_id, event["channel"], event.get("ts"), f"<@{event.get('user', '')}> on it!",
             lease.attempt, worker, posted_at))
    finally:
        db.close()
    if "crash-after-post" in text and lease.attempt == 1:
        log.warning("demo switch crash-after-post: exiting without Complete")
        os._exit(137)
    return {"posted": True, "channel": event["channel"], "ts": f"{posted_at:.6f}"}


def run_claimed(lease: Lease, payload, args, worker):
    """Runs the work for a claimed (heartbeating) lease and settles the receipt; returns the
    outcome: "completed", "retry", "quarantined", "lost" (someone else holds it) or
    "unsettled" (claimd unreachable: the lease runs out and a recovery worker takes over)."""
    key = lease.key
    try:
        try:
            if hashlib.sha256(payload).digest() != lease.receipt.fingerprint:
                raise PermanentError("recovery payload does not match the fingerprint")
            envelope = parse_event(payload)
            response = post_reply(lease, envelope, args, worker)
        except LeaseLost:
            log.warning("%s: stopped, another holder has it; nothing posted", key)
            return "lost"
        except PermanentError as error:
            return _settle(lease, "quarantined", lease.quarantine, str(error))
        except TransientError as error:
            return _settle(lease, "retry", lease.retry, str(error), error.retry_after)
        except Exception as error:  # a bug or an outage: give it back
            # Where, not what: an exception's message could quote the payload.
            frame = traceback.extract_tb(error.__traceback__)[-1]
            log.error("%s: work failed with %s at %s:%d", key, type(error).__name__,
                      os.path.basename(frame.filename), frame.lineno)
            return _settle(lease, "retry", lease.retry, f"unexpected {type(error).__name__}")
        return _settle(lease, "completed", lease.complete, json.dumps(response).encode())
    finally:
        lease.stop()  # settled or not: no heartbeat outlives the work


def _settle(lease, outcome, call, *args):
    key = lease.key
    try:
        call(*args)
    except ClaimdError as error:
        if lease.lost.is_set():
            log.warning("%s: could not settle as %s, another holder has it", key, outcome)
            return "lost"
        log.error("%s: could not settle as %s (%s); the lease will run out and a recovery"
                  " worker takes over", key, outcome, error.code.name)
        return "unsettled"
    # Our own error texts only: they are stored and logged, so they never hold secrets.
    log.info("%s: %s%s", key, outcome, f" ({args[0]})" if outcome != "completed" else "")
    return outcome
