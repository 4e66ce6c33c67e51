"""What the scenario tests share: a Slack stand-in that signs and delivers requests over
real HTTP, receiver and recovery-worker processes, the replies table and claimd lookups.

The tests run from examples/python (`python -m unittest tests.test_retry_storm`) against a
running claimd, configured by the environment:
  CLAIMD_ADDR       claimd's host:port (required)
  CLAIMD_API_KEY    an API key, if that claimd has keys
cargo test (tests/it/polyglot/python.rs) starts claimd and sets them. The `claimd` package
(clients/python) is the installed one, or the checkout's (see claimd_client.py).
"""

import hashlib
import hmac
import http.client
import json
import os
import queue
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

import claimd_client  # first: makes the claimd package importable
from claimd import ClaimdError, Claims, OrphanReason, State  # noqa: F401 (ClaimdError: for tests)

EXAMPLE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMESPACE = "slack-events"


def wait_for(what, check, timeout=15.0):
    """Polls check() until it returns something truthy; fails the test after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def event_body(event_id, text="hello bot", channel="C0123"):
    """An event_callback body as Slack sends it for an app mention."""
    return json.dumps({
        "token": "deprecated-verification-token", "team_id": "T0001", "api_app_id": "A0001",
        "type": "event_callback", "event_id": event_id, "event_time": int(time.time()),
        "event": {"type": "app_mention", "user": "U0001", "text": f"<@U0BOT> {text}",
                  "ts": "1700000000.000100", "channel": channel},
    }).encode()


class Delivery:
    """One HTTP answer, with how long it took as the client saw it."""

    def __init__(self, status, headers, body, seconds):
        self.status, self.headers, self.body, self.seconds = status, headers, body, seconds
        self.decision = headers.get("X-Claimd-Decision")

    def json(self):
        return json.loads(self.body)


class Slack:
    """Signs and delivers requests as Slack does."""

    def __init__(self, secret):
        self.secret = secret

    def post(self, url, body, content_type="application/json", retry_num=0, timestamp=None,
             secret=None, signature=None):
        timestamp = str(int(time.time()) if timestamp is None else timestamp)
        if signature is None:
            base = b"v0:" + timestamp.encode() + b":" + body
            key = (secret or self.secret).encode()
            signature = "v0=" + hmac.new(key, base, hashlib.sha256).hexdigest()
        headers = {"Content-Type": content_type, "X-Slack-Request-Timestamp": timestamp}
        if signature:
            headers["X-Slack-Signature"] = signature
        if retry_num:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        parts = urllib.parse.urlsplit(url)
        started = time.monotonic()
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        try:
            connection.request("POST", parts.path or "/", body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        return Delivery(response.status, response.headers, data, time.monotonic() - started)

    def slash_command(self, url, command="/status", text="now"):
        body = urllib.parse.urlencode({"command": command, "text": text, "user_id": "U0001",
                                       "channel_id": "C0123"}).encode()
        return self.post(url, body, content_type="application/x-www-form-urlencoded")


class Process:
    """A receiver.py or recover.py child process with its log in a file."""

    def __init__(self, script, args, env, log_path, wait_for_listen=True):
        self.log_path = log_path
        self.log_file = open(log_path, "wb")
        self.popen = subprocess.Popen([sys.executable, os.path.join(EXAMPLE, script)] + args,
                                      cwd=EXAMPLE, env=env, stdout=subprocess.PIPE,
                                      stderr=self.log_file, stdin=subprocess.DEVNULL)
        self.url = None
        if wait_for_listen:
            lines = queue.Queue()
            threading.Thread(target=lambda: lines.put(self.popen.stdout.readline()),
                             daemon=True).start()
            try:
                line = lines.get(timeout=20).decode()
            except queue.Empty:
                line = ""
            if not line.startswith("listening on "):
                self.kill()
                raise AssertionError(f"{script} did not start:\n{self.log()}")
            self.url = line.split()[-1] + "/slack/events"

    def log(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def kill(self):
        """SIGKILL, as kill -9 does: nothing runs after it."""
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()
        self.popen.stdout.close()
        self.log_file.close()

    def output(self, timeout=30):
        """For a process that exits by itself: waits for it and returns its stdout."""
        out, _ = self.popen.communicate(timeout=timeout)
        self.log_file.close()
        if self.popen.returncode != 0:
            raise AssertionError(f"exited with {self.popen.returncode}:\n{self.log()}")
        return out.decode()


class Scenario(unittest.TestCase):
    """A temp dir with the replies database, a Slack stand-in, and processes that are
    killed (their logs shown on stderr) when the test ends."""

    lease = 2.0
    work_seconds = 1.0

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="claimd-slack-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.db = os.path.join(self.dir, "replies.db")
        self.signing_secret = "test-signing-" + secrets.token_hex(8)
        self.slack = Slack(self.signing_secret)
        self.claims = Claims(os.environ["CLAIMD_ADDR"], api_key=os.environ.get("CLAIMD_API_KEY"))
        self.addCleanup(self.claims.close)
        self.processes = []
        self.addCleanup(self._stop_processes)

    def _stop_processes(self):
        for process in self.processes:
            process.kill()
            sys.stderr.write(f"--- {process.log_path}\n{process.log()}")
        for process in self.processes:
            self.assert_no_secrets(process.log())

    def assert_no_secrets(self, log):
        self.assertNotIn(self.signing_secret, log, "the signing secret was logged")
        key = os.environ.get("CLAIMD_API_KEY")
        if key:
            self.assertNotIn(key, log, "the API key was logged")
        self.assertNotIn("hello bot", log, "a payload was logged")

    @staticmethod
    def new_event_id(name):
        """A fresh Slack-like event id, so runs against one claimd never collide."""
        return f"Ev{name}{secrets.token_hex(4).upper()}"

    def env(self, **overrides):
        env = dict(os.environ, SLACK_SIGNING_SECRET=self.signing_secret,
                   PYTHONDONTWRITEBYTECODE="1", LOG_LEVEL="DEBUG")
        env.update({k: v for k, v in overrides.items() if v is not None})
        return {k: v for k, v in env.items() if v != ""}  # "" unsets

    def common_args(self, lease, work_seconds, claimd):
        return ["--claimd", claimd or os.environ["CLAIMD_ADDR"], "--namespace", NAMESPACE,
                "--db", self.db, "--lease", str(lease or self.lease),
                "--work-seconds", str(self.work_seconds if work_seconds is None else work_seconds)]

    def receiver(self, name="receiver", lease=None, work_seconds=None, claimd=None, **env):
        args = ["--listen", "127.0.0.1:0"] + self.common_args(lease, work_seconds, claimd)
        process = Process("receiver.py", args, self.env(**env),
                          os.path.join(self.dir, f"{name}.log"))
        self.processes.append(process)
        return process

    def recover(self, *extra, name="recover", lease=None, work_seconds=None, **env):
        args = self.common_args(lease, work_seconds, None) + list(extra)
        process = Process("recover.py", args, self.env(**env),
                          os.path.join(self.dir, f"{name}.log"), wait_for_listen=False)
        self.processes.append(process)
        return process

    def replies(self, event_id):
        """Rows posted for event_id: the replies as a channel would show them."""
        db = sqlite3.connect(self.db)
        try:
            return db.execute("SELECT id, attempt, posted_by, posted_at FROM replies"
                              " WHERE event_id = ? ORDER BY id", (event_id,)).fetchall()
        finally:
            db.close()

    def receipt(self, event_id):
        """The event's receipt in claimd; claimd.ClaimdError NOT_FOUND when there is none."""
        return self.claims.get(NAMESPACE, event_id)

    def state(self, event_id):
        return State(self.receipt(event_id).state).name

    def wait_for_state(self, event_id, state, timeout=15.0):
        wait_for(f"{event_id} to be {state}", lambda: self.state(event_id) == state, timeout)
        return self.receipt(event_id)

    def orphan_reasons(self):
        """{key: "LEASE_EXPIRED" or "RETRY_DUE"} of the first page of orphans."""
        page = self.claims.list_orphaned(NAMESPACE, page_size=1000)
        return {o.receipt.key: OrphanReason(o.reason).name for o in page.orphans}

    def receipt_count(self):
        """How many receipts the namespace holds (up to 1000)."""
        return len(self.claims.list(NAMESPACE, page_size=1000).receipts)

    def assert_acked(self, delivery, decision, status=200):
        """A delivery answered in time (Slack's 3 s) with the expected decision."""
        self.assertEqual(delivery.status, status, delivery.body)
        self.assertEqual(delivery.decision, decision)
        self.assertLess(delivery.seconds, 3.0, "Slack gives up after 3 s")
