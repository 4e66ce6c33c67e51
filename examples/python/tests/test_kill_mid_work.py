"""Scenario 3, a receiver killed with SIGKILL after it acknowledged an event: Slack will not
send it again, its lease runs out, and the recovery worker (recover.py) finds it with
ListOrphaned, takes it over and posts the one reply. Also the narrowest window: killed
right after the post but before Complete, the reply is not posted a second time."""

import json
import unittest

from tests.harness import Scenario, event_body, wait_for


class KilledMidWork(Scenario):
    lease = 1.0  # claimd's minimum: the orphan is found about a second after the kill

    def test_recovery_worker_finishes_a_killed_receivers_event(self):
        # 60 s of work: the kill surely comes before the post.
        receiver = self.receiver(work_seconds=60)
        event_id = self.new_event_id("KILLED")
        body = event_body(event_id)
        self.assert_acked(self.slack.post(receiver.url, body), "CLAIMED")
        # Working: heartbeats keep the 1 s lease alive past its first expiry.
        def renewed():
            receipt = self.receipt(event_id)
            renewed_at = receipt.lease_expires_at.ToMilliseconds() - 1000
            return renewed_at > receipt.created_at.ToMilliseconds() + 200

        wait_for("a heartbeat", renewed)
        receiver.kill()
        self.assertEqual(self.replies(event_id), [], "killed before the post")
        self.assertEqual(self.state(event_id), "PROCESSING")

        wait_for("the orphan", lambda: self.orphan_reasons().get(event_id)
                 == "LEASE_EXPIRED", timeout=10)
        worker = self.recover("--interval", "0.2", work_seconds=0.2)
        receipt = self.wait_for_state(event_id, "COMPLETED")

        replies = self.replies(event_id)
        self.assertEqual(len(replies), 1, f"exactly one reply: {replies}")
        _, attempt, posted_by, posted_at = replies[0]
        self.assertEqual((attempt, receipt.attempt), (2, 2), "a takeover is attempt 2")
        self.assertEqual(posted_by, f"recover {worker.popen.pid}")
        self.assertEqual(json.loads(receipt.response),
                         {"posted": True, "channel": "C0123", "ts": f"{posted_at:.6f}"})
        self.assertNotIn(event_id, self.orphan_reasons())

        # A late Slack retry to a fresh receiver replays the completion; no second reply.
        again = self.receiver("receiver-2")
        self.assert_acked(self.slack.post(again.url, body, retry_num=1), "COMPLETED")
        self.assertEqual(len(self.replies(event_id)), 1)

    def test_killed_between_post_and_complete_posts_once(self):
        # The demo switch crash-after-post exits right after the insert on attempt 1.
        receiver = self.receiver(work_seconds=0)
        event_id = self.new_event_id("KILLEDAFTERPOST")
        self.assert_acked(self.slack.post(receiver.url, event_body(event_id, "crash-after-post")),
                          "CLAIMED")
        wait_for("the crash", lambda: receiver.popen.poll() is not None)
        self.assertEqual(len(self.replies(event_id)), 1)
        self.assertEqual(self.receipt(event_id).checkpoint, b"posting")

        worker = self.recover("--interval", "0.2", work_seconds=0)
        receipt = self.wait_for_state(event_id, "COMPLETED")
        replies = self.replies(event_id)
        self.assertEqual(len(replies), 1, f"not posted again: {replies}")
        self.assertEqual(receipt.attempt, 2)
        self.assertTrue(json.loads(receipt.response)["posted"])
        self.assertIn("already posted by an earlier attempt", worker.log())


if __name__ == "__main__":
    unittest.main()
