"""Claim with `wait` from Python (docs/DESIGN.md §2.9), through the claimd package against
the running claimd: a retry that arrives while the first request works waits and gets the
stored response once it completes; one whose holder never comes back takes the work over
when the lease runs out; a wait that runs out answers IN_FLIGHT."""

import os
import secrets
import threading
import time
import unittest

import claimd_client  # noqa: F401  (first: makes the claimd package importable)
from claimd import Claims, Decision, Lease

NAMESPACE = "api:payments"


class Wait(unittest.TestCase):
    def setUp(self):
        self.claims = Claims(os.environ["CLAIMD_ADDR"], api_key=os.environ.get("CLAIMD_API_KEY"))
        self.addCleanup(self.claims.close)
        self.key = f"client-7:POST /payments:{secrets.token_hex(8)}"

    def claim(self, **kwargs):
        return self.claims.claim(NAMESPACE, self.key, b"fp", **kwargs)

    def test_a_retry_waits_for_the_first_requests_response(self):
        first = self.claim(lease=30)
        self.assertIsInstance(first, Lease)
        done = threading.Timer(0.5, first.complete, args=(b'{"status":201}',))
        done.start()
        started = time.monotonic()
        retry = self.claim(lease=30, wait=10)
        done.join()
        self.assertEqual(retry.decision, Decision.COMPLETED)
        self.assertEqual(retry.receipt.response, b'{"status":201}')
        self.assertGreaterEqual(time.monotonic() - started, 0.3, "it waited")

    def test_a_retry_takes_over_when_the_holders_lease_runs_out(self):
        first = self.claim(lease=1)
        self.assertIsInstance(first, Lease)
        first.stop()  # the holder never comes back: no more heartbeats
        retry = self.claim(lease=30, wait=10)
        self.assertEqual(retry.decision, Decision.CLAIMED)
        self.assertEqual(retry.receipt.attempt, 2)
        retry.complete()

    def test_a_wait_that_runs_out_answers_in_flight(self):
        first = self.claim(lease=30)
        self.assertEqual(first.decision, Decision.CLAIMED)
        retry = self.claim(lease=30, wait=0.3)
        self.assertEqual(retry.decision, Decision.IN_FLIGHT)
        first.complete()


if __name__ == "__main__":
    unittest.main()
