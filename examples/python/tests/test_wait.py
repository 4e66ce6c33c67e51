"""Claim with `wait` from Python (docs/DESIGN.md §2.9), through claimd_client against the
running claimd: a retry that arrives while the first request works waits and gets the
stored response once it completes; one whose holder never comes back takes the work over
when the lease runs out; a wait that runs out answers IN_FLIGHT."""

import os
import secrets
import threading
import time
import unittest

import claimd_client


class Wait(unittest.TestCase):
    def setUp(self):
        self.claimd = claimd_client.Claimd(os.environ["CLAIMD_ADDR"], "api:payments",
                                           api_key=os.environ.get("CLAIMD_API_KEY"))
        self.key = f"client-7:POST /payments:{secrets.token_hex(8)}"

    def decision(self, answer):
        return self.claimd.decision_name(answer.decision)

    def test_a_retry_waits_for_the_first_requests_response(self):
        first = self.claimd.claim(self.key, b"fp", lease=30)
        self.assertEqual(self.decision(first), "CLAIMED")
        done = threading.Timer(0.5, lambda: self.claimd.complete(
            self.key, first.claim_token, b'{"status":201}'))
        done.start()
        started = time.monotonic()
        retry = self.claimd.claim(self.key, b"fp", lease=30, wait=10)
        done.join()
        self.assertEqual(self.decision(retry), "COMPLETED")
        self.assertEqual(retry.receipt.response, b'{"status":201}')
        self.assertGreaterEqual(time.monotonic() - started, 0.3, "it waited")

    def test_a_retry_takes_over_when_the_holders_lease_runs_out(self):
        first = self.claimd.claim(self.key, b"fp", lease=1)
        self.assertEqual(self.decision(first), "CLAIMED")
        retry = self.claimd.claim(self.key, b"fp", lease=30, wait=10)
        self.assertEqual(self.decision(retry), "CLAIMED")
        self.assertEqual(retry.receipt.attempt, 2)

    def test_a_wait_that_runs_out_answers_in_flight(self):
        first = self.claimd.claim(self.key, b"fp", lease=30)
        self.assertEqual(self.decision(first), "CLAIMED")
        retry = self.claimd.claim(self.key, b"fp", lease=30, wait=0.3)
        self.assertEqual(self.decision(retry), "IN_FLIGHT")


if __name__ == "__main__":
    unittest.main()
