"""Scenario 2, two receiver processes behind one claimd (as two replicas behind a load
balancer): the original delivery to one and the retries to the other, and a burst of
simultaneous deliveries to both. Each event gets exactly one reply."""

import threading
import time
import unittest

from tests.harness import Scenario, event_body


class TwoReceivers(Scenario):
    lease = 2.0
    work_seconds = 3.5

    def test_one_reply_across_two_receivers(self):
        a = self.receiver("receiver-a")
        b = self.receiver("receiver-b")

        one, two = self.new_event_id("TWORECEIVERS"), self.new_event_id("TWORECEIVERS")

        # Event 1: the original reaches A, Slack's retries land on B while A works.
        first = event_body(one)
        started = time.monotonic()
        self.assert_acked(self.slack.post(a.url, first), "CLAIMED")
        self.assert_acked(self.slack.post(b.url, first, retry_num=1), "IN_FLIGHT")

        # Event 2: eight simultaneous deliveries, alternating between A and B.
        second = event_body(two)
        start = threading.Barrier(8)
        answers = [None] * 8

        def deliver(i):
            start.wait()
            answers[i] = self.slack.post((a, b)[i % 2].url, second, retry_num=i)

        threads = [threading.Thread(target=deliver, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        decisions = sorted(answer.decision for answer in answers)
        self.assertEqual(decisions, ["CLAIMED"] + ["IN_FLIGHT"] * 7)
        for answer in answers:
            self.assertEqual(answer.status, 200)
            self.assertLess(answer.seconds, 3.0, "Slack gives up after 3 s")

        # Past event 1's first lease: still in flight on A thanks to its heartbeats.
        time.sleep(max(0.0, started + 2.5 - time.monotonic()))
        self.assert_acked(self.slack.post(b.url, first, retry_num=2), "IN_FLIGHT")
        self.wait_for_state(one, "COMPLETED")
        self.wait_for_state(two, "COMPLETED")
        self.assert_acked(self.slack.post(b.url, first, retry_num=3), "COMPLETED")
        self.assert_acked(self.slack.post(a.url, second, retry_num=3), "COMPLETED")

        for event_id in (one, two):
            replies = self.replies(event_id)
            self.assertEqual(len(replies), 1, f"{event_id}: exactly one reply: {replies}")
            self.assertEqual(self.receipt(event_id).attempt, 1)
        posted_by = self.replies(one)[0][2]
        self.assertIn(f"receiver {a.popen.pid}", posted_by, "A did event 1")


if __name__ == "__main__":
    unittest.main()
