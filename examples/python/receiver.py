"""A Slack Events API receiver that claims every event in claimd before doing its work.

Slack allows three seconds for an answer and re-sends what it did not get one for
(X-Slack-Retry-Num 1, 2, 3, byte-identical). So the receiver:

1. verifies the Slack signature (HMAC-SHA256 of "v0:<timestamp>:<raw body>" with the
   signing secret, compared in constant time; timestamps more than 5 minutes off are
   replays) and answers 401 to anything that fails, before claimd is asked anything;
2. answers url_verification with the challenge, and a slash command (a form body with
   `command=`, no event id, never retried) at once with an ephemeral message, no claim;
3. for an event_callback, calls Claim (key = event_id, fingerprint = SHA-256 of the body,
   recovery_payload = the body, delivery_attempt = X-Slack-Retry-Num) with a 1 s deadline,
   and answers right after it:

   CLAIMED                     200, then the work runs in a background thread (work.py)
   IN_FLIGHT, COMPLETED,
   RETRY_SCHEDULED, QUARANTINED  200, nothing else: someone has it or had it
   CONFLICT                    200 + X-Slack-No-Retry: 1, logged as a warning: the same
                               event id with another body; a retry would conflict again
   UNAVAILABLE, DEADLINE_EXCEEDED,
   RESOURCE_EXHAUSTED          503: nothing was recorded, so Slack must retry
   INVALID_ARGUMENT            400 + X-Slack-No-Retry: 1 (e.g. an event id over 512 bytes)
   other errors (bad API key)  500: Slack retries while the operator fixes the config

Every answer to an event says the decision in `X-Claimd-Decision` (for tests and curl).

Run (see README.md):  SLACK_SIGNING_SECRET=... python receiver.py --listen 0.0.0.0:3000
Never logged: the signing secret, the API key, claim tokens, request bodies.
"""

import argparse
import hashlib
import hmac
import json
import logging
import os
import re
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc

import claimd_client  # first: makes the claimd package importable
import work
from claimd import ClaimdError, Lease

log = logging.getLogger("receiver")
MAX_BODY = 1 << 20
REPLAY_WINDOW = 5 * 60  # seconds, as Slack recommends
RETRY_LATER = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
               grpc.StatusCode.RESOURCE_EXHAUSTED)


def signature_problem(secret, timestamp, signature, body, now=None):
    """Why a request is not from Slack, or None if its signature verifies."""
    if not timestamp or not signature:
        return "missing signature headers"
    try:
        sent = int(timestamp)
    except ValueError:
        return "malformed timestamp"
    if abs((time.time() if now is None else now) - sent) > REPLAY_WINDOW:
        return "timestamp more than 5 minutes off (replay?)"
    base = b"v0:" + timestamp.encode() + b":" + body
    expected = b"v0=" + hmac.new(secret, base, hashlib.sha256).hexdigest().encode()
    if not hmac.compare_digest(expected, signature.encode("utf-8", "replace")):
        return "signature mismatch"
    return None


class Handler(BaseHTTPRequestHandler):
    server_version = "claimd-slack-example"

    def do_GET(self):
        if self.path == "/healthz":
            self.answer(200, {"ok": True})
        else:
            self.answer(404, {"error": "not found"})

    def do_POST(self):
        app = self.server.app
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return self.answer(400, {"error": "bad Content-Length"})
        if length > MAX_BODY:
            return self.answer(413, {"error": "body too large"})
        body = self.rfile.read(length)
        problem = signature_problem(app.secret, self.headers.get("X-Slack-Request-Timestamp"),
                                    self.headers.get("X-Slack-Signature"), body)
        if problem:
            log.warning("rejected %s: %s", self.path, problem)
            return self.answer(401, {"error": "invalid signature"})
        if self.headers.get_content_type() == "application/x-www-form-urlencoded":
            return self.slash_command(body)
        try:
            envelope = json.loads(body)
            kind = envelope.get("type")
        except (ValueError, AttributeError):
            return self.answer(400, {"error": "body is not a JSON object"}, no_retry=True)
        if kind == "url_verification":
            return self.answer(200, {"challenge": envelope.get("challenge", "")})
        if kind == "event_callback":
            return self.event(app, envelope, body)
        log.info("ignored a %r callback", kind)
        return self.answer(200, {"ok": True})

    def slash_command(self, body):
        """A slash command has no id and is never retried: no claim, answer at once."""
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
        command = form.get("command", [""])[0]
        if not command:
            return self.answer(400, {"error": "no command"}, no_retry=True)
        log.info("slash command %s answered without a claim", command)
        return self.answer(200, {"response_type": "ephemeral",
                                 "text": f"{command}: on it (only you can see this)"})

    def event(self, app, envelope, body):
        event_id = envelope.get("event_id")
        if not isinstance(event_id, str) or not event_id:
            return self.answer(400, {"error": "no event_id"}, no_retry=True)
        # Slack's retry headers are not covered by the signature: a hint, cleaned for logs.
        try:
            retry_num = min(max(0, int(self.headers.get("X-Slack-Retry-Num") or 0)), 2**32 - 1)
        except ValueError:
            retry_num = 0
        reason = re.sub(r"[^A-Za-z0-9_]", "", self.headers.get("X-Slack-Retry-Reason", ""))
        delivery = event_id
        if retry_num:
            delivery += f" (Slack retry {retry_num}, {reason[:40] or '?'})"
        try:
            claim = app.claims.claim(app.args.namespace, event_id, hashlib.sha256(body).digest(),
                                     lease=app.args.lease, recovery_payload=body,
                                     delivery_attempt=retry_num, timeout=app.args.claim_deadline)
        except ClaimdError as error:
            code = error.code
            log.error("claim of %s failed: %s", delivery, code.name)
            if code in RETRY_LATER:
                return self.answer(503, {"error": "try again later"})
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                return self.answer(400, {"error": "event rejected"}, no_retry=True)
            return self.answer(500, {"error": "claim failed"})
        decision = claim.decision.name
        attempt = claim.receipt.attempt
        if isinstance(claim, Lease):  # CLAIMED: it heartbeats from now on
            log.info("%s: CLAIMED (attempt %d), working", delivery, attempt)
            try:
                self.answer(200, {"ok": True}, decision=decision)  # ack first, then work
            finally:
                app.start_work(claim, body)
        elif decision == "CONFLICT":
            log.warning("%s: CONFLICT, the same event id came with another body; ignored",
                        delivery)
            self.answer(200, {"ok": True}, decision=decision, no_retry=True)
        else:
            log.info("%s: %s (attempt %d), nothing to do", delivery, decision, attempt)
            self.answer(200, {"ok": True}, decision=decision)

    def answer(self, status, payload, decision=None, no_retry=False):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if decision:
            self.send_header("X-Claimd-Decision", decision)
        if no_retry:
            self.send_header("X-Slack-No-Retry", "1")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def log_message(self, format, *args):  # the request line only, never a body
        log.debug("%s %s", self.address_string(), format % args)


class App:
    """What the handlers share: settings, the claimd client and the running work."""

    def __init__(self, args, secret):
        self.args = args
        self.secret = secret
        self.claims = claimd_client.connect(args)
        self.worker = f"receiver {os.getpid()}"

    def start_work(self, lease, body):
        # Not a daemon (request threads are, and would pass it on): on SIGTERM the process
        # waits for started work to settle.
        threading.Thread(target=work.run_claimed, name=f"work {lease.key}", daemon=False,
                         args=(lease, body, self.args, self.worker)).start()


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Slack Events API receiver guarded by claimd")
    parser.add_argument("--listen", default=os.environ.get("RECEIVER_LISTEN", "127.0.0.1:3000"),
                        help="host:port to serve HTTP on; port 0 picks one (env RECEIVER_LISTEN)")
    parser.add_argument("--claim-deadline", type=float,
                        default=float(os.environ.get("CLAIM_DEADLINE_SECONDS", "1")),
                        help="gRPC deadline of Claim in seconds (env CLAIM_DEADLINE_SECONDS)")
    claimd_client.add_arguments(parser)
    work.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.lease < 1:
        parser.error("--lease must be at least 1 second (claimd's minimum)")
    return args


def main(argv=None):
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    secret = os.environ.get("SLACK_SIGNING_SECRET")
    if not secret:  # only from the environment: a flag would show in `ps`
        sys.exit("SLACK_SIGNING_SECRET is not set")
    host, _, port = args.listen.rpartition(":")
    server = ThreadingHTTPServer((host, int(port)), Handler)
    server.app = App(args, secret.encode())
    work.connect_db(args.db).close()  # create the table before the first event

    def stop(signum, frame):
        log.info("stopping: no new requests; started work finishes first")
        threading.Thread(target=server.shutdown).start()
        signal.signal(signum, lambda *_: os._exit(1))  # a second signal: stop now

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    bound_host, bound_port = server.server_address[:2]
    print(f"listening on http://{bound_host}:{bound_port}", flush=True)
    log.info("claiming in namespace %s at %s, lease %gs", args.namespace, args.claimd, args.lease)
    server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()
