"""Scenario 4, the failure paths: a transient failure gives the event back (Retry, then the
recovery worker finishes it), a permanent one dead-letters it (Quarantine), the same event
id with another body is a conflict, a slash command needs no claim, and a claimd that
cannot be reached makes the receiver answer 503 so that Slack retries."""

import json
import socket
import unittest

from tests.harness import Scenario, event_body, wait_for


class FailurePaths(Scenario):
    lease = 2.0
    work_seconds = 0.2

    def test_transient_failure_retries_then_recovers(self):
        receiver = self.receiver()
        event_id = self.new_event_id("TRANSIENT")
        body = event_body(event_id, "fail-transient")
        self.assert_acked(self.slack.post(receiver.url, body), "CLAIMED")
        receipt = self.wait_for_state(event_id, "RETRY_WAIT")
        self.assertIn("fail-transient", receipt.last_error)
        self.assertEqual(self.replies(event_id), [])
        # A Slack retry while the retry is scheduled changes nothing.
        self.assert_acked(self.slack.post(receiver.url, body, retry_num=1), "RETRY_SCHEDULED")

        # Once due (claimd's backoff: about a second), the recovery worker takes it over;
        # the demo switch fails the first attempt only.
        wait_for("the retry to be due",
                 lambda: self.orphan_reasons().get(event_id) == "RETRY_DUE")
        summary = json.loads(self.recover("--once").output())
        self.assertEqual(summary, {"completed": 1})
        receipt = self.receipt(event_id)
        self.assertEqual((self.state(event_id), receipt.attempt), ("COMPLETED", 2))
        self.assertEqual(len(self.replies(event_id)), 1)

    def test_permanent_failure_quarantines(self):
        receiver = self.receiver()
        poison_id, malformed_id = self.new_event_id("POISON"), self.new_event_id("MALFORMED")
        poison = event_body(poison_id, "fail-permanent")
        self.assert_acked(self.slack.post(receiver.url, poison), "CLAIMED")
        receipt = self.wait_for_state(poison_id, "QUARANTINED")
        self.assertIn("fail-permanent", receipt.last_error)
        self.assert_acked(self.slack.post(receiver.url, poison, retry_num=1), "QUARANTINED")

        # A malformed event (no channel to answer in) is poison as well.
        malformed = json.loads(event_body(malformed_id))
        del malformed["event"]["channel"]
        self.assert_acked(self.slack.post(receiver.url, json.dumps(malformed).encode()), "CLAIMED")
        receipt = self.wait_for_state(malformed_id, "QUARANTINED")
        self.assertIn("malformed event", receipt.last_error)
        # Without an event id there is nothing to claim: 400, and Slack is told not to retry.
        del malformed["event_id"]
        no_id = self.slack.post(receiver.url, json.dumps(malformed).encode())
        self.assertEqual((no_id.status, no_id.headers.get("X-Slack-No-Retry")), (400, "1"))

        # The recovery worker finds nothing to do: dead letters are not orphans.
        self.assertEqual(json.loads(self.recover("--once").output()), {})
        self.assertEqual(self.replies(poison_id) + self.replies(malformed_id), [])

    def test_same_event_id_with_another_body_is_a_conflict(self):
        receiver = self.receiver()
        event_id = self.new_event_id("CONFLICT")
        self.assert_acked(self.slack.post(receiver.url, event_body(event_id)), "CLAIMED")
        other = self.slack.post(receiver.url, event_body(event_id, "a different text"))
        self.assert_acked(other, "CONFLICT")
        self.assertEqual(other.headers.get("X-Slack-No-Retry"), "1")
        self.wait_for_state(event_id, "COMPLETED")
        self.assertEqual(len(self.replies(event_id)), 1)
        self.assertIn("CONFLICT", receiver.log())

    def test_slash_command_is_answered_without_a_claim(self):
        receiver = self.receiver()
        before = self.receipt_count()
        answer = self.slack.slash_command(receiver.url, "/status")
        self.assertEqual(answer.status, 200, answer.body)
        self.assertLess(answer.seconds, 3.0)
        self.assertEqual(answer.json()["response_type"], "ephemeral")
        self.assertIsNone(answer.decision)
        forged = self.slack.post(receiver.url, b"command=%2Fstatus", secret="guess",
                                 content_type="application/x-www-form-urlencoded")
        self.assertEqual(forged.status, 401)
        self.assertEqual(self.receipt_count(), before, "no receipt was written")

    def test_unreachable_claimd_answers_503(self):
        event_id = self.new_event_id("UNREACHABLE")
        with socket.socket() as closed, socket.socket() as silent:
            closed.bind(("127.0.0.1", 0))  # nothing listens: UNAVAILABLE at once
            silent.bind(("127.0.0.1", 0))
            silent.listen()  # accepts, never answers: DEADLINE_EXCEEDED after 1 s
            for name, sock in (("closed", closed), ("silent", silent)):
                address = "127.0.0.1:%d" % sock.getsockname()[1]
                receiver = self.receiver(f"receiver-{name}", claimd=address)
                answer = self.slack.post(receiver.url, event_body(event_id))
                self.assertEqual(answer.status, 503, f"{name}: {answer.body}")
                self.assertIsNone(answer.headers.get("X-Slack-No-Retry"), "Slack must retry")
                self.assertLess(answer.seconds, 3.0)
                self.assertEqual(self.slack.slash_command(receiver.url).status, 200)
            self.assertIn("DEADLINE_EXCEEDED", receiver.log())
        self.assertEqual(self.replies(event_id), [])


if __name__ == "__main__":
    unittest.main()
