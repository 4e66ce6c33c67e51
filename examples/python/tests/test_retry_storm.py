"""Scenario 1, a Slack retry storm: the original delivery of an event while its work is
slower than Slack's 3 s, retries 1, 2 and 3 of the same body, forged and replayed requests
in between. Exactly one reply is posted; every delivery is answered in under 3 s."""

import json
import time
import unittest

import grpc

from tests.harness import ClaimdError, Scenario, event_body


class RetryStorm(Scenario):
    lease = 2.0  # heartbeats every 0.67 s keep it while the 4 s of work run
    work_seconds = 4.0

    def test_retries_of_a_slow_event_post_one_reply(self):
        receiver = self.receiver()
        event_id = self.new_event_id("RETRYSTORM")
        body = event_body(event_id)

        # Slack proves the URL first.
        challenge = self.slack.post(receiver.url, b'{"type":"url_verification","challenge":"c-1"}')
        self.assertEqual((challenge.status, challenge.json()), (200, {"challenge": "c-1"}))

        # Before the real delivery: a forged signature (wrong secret, tampered body), a missing
        # one, a replayed one (stale timestamp) and one from the future. All 401, nothing claimed.
        forged = self.slack.post(receiver.url, event_body(event_id, "tampered"), secret="guess")
        missing = self.slack.post(receiver.url, body, signature="")
        stale = self.slack.post(receiver.url, body, timestamp=int(time.time()) - 6 * 60)
        future = self.slack.post(receiver.url, body, timestamp=int(time.time()) + 6 * 60)
        for rejected in (forged, missing, stale, future):
            self.assertEqual(rejected.status, 401, rejected.body)
            self.assertIsNone(rejected.decision)
        with self.assertRaises(ClaimdError) as nothing:
            self.receipt(event_id)
        self.assertEqual(nothing.exception.code, grpc.StatusCode.NOT_FOUND)

        # The original: claimed and acknowledged at once, the work goes on for 4 s.
        started = time.monotonic()
        self.assert_acked(self.slack.post(receiver.url, body), "CLAIMED")
        # Retry 1 as Slack sends it, while the work runs.
        self.assert_acked(self.slack.post(receiver.url, body, retry_num=1), "IN_FLIGHT")
        # Retry 2 after the first lease (2 s) would have run out: the heartbeats kept it.
        time.sleep(max(0.0, started + 2.6 - time.monotonic()))
        self.assert_acked(self.slack.post(receiver.url, body, retry_num=2), "IN_FLIGHT")
        self.assertEqual(self.replies(event_id), [], "posted before the work was done")

        receipt = self.wait_for_state(event_id, "COMPLETED")
        # Retry 3 arrives after completion: 200, the stored response, no new reply.
        self.assert_acked(self.slack.post(receiver.url, body, retry_num=3), "COMPLETED")

        replies = self.replies(event_id)
        self.assertEqual(len(replies), 1, f"exactly one reply expected: {replies}")
        _, attempt, posted_by, posted_at = replies[0]
        self.assertEqual(attempt, 1)
        self.assertTrue(posted_by.startswith("receiver "))
        receipt = self.receipt(event_id)
        self.assertEqual(receipt.attempt, 1)
        response = json.loads(receipt.response)
        self.assertEqual(response, {"posted": True, "channel": "C0123", "ts": f"{posted_at:.6f}"})
        self.assertEqual(receipt.recovery_payload, b"", "dropped at completion")
        log = receiver.log()
        self.assertIn("Slack retry 3", log)


if __name__ == "__main__":
    unittest.main()
