"""Against a claimd with API keys (CLAIMD_API_KEY set to one of its keys): the receiver
sends its key as `authorization: Bearer` metadata; with a wrong or no key the claim fails
(UNAUTHENTICATED) and the receiver answers 500 so that Slack retries while the operator
fixes the key. No key is ever logged."""

import os
import unittest

from tests.harness import Scenario, event_body


class ApiKey(Scenario):
    work_seconds = 0.1

    def test_receiver_sends_its_api_key(self):
        self.assertTrue(os.environ.get("CLAIMD_API_KEY"),
                        "run against a claimd with API keys, CLAIMD_API_KEY set to one")
        receiver = self.receiver()
        good, bad = self.new_event_id("APIKEY"), self.new_event_id("APIKEY")
        body = event_body(good)
        self.assert_acked(self.slack.post(receiver.url, body), "CLAIMED")
        self.wait_for_state(good, "COMPLETED")

        wrong_key = "claimd_0000000000000000_wrongsecretwrongsecret"
        for name, key in (("wrong-key", wrong_key), ("no-key", "")):
            other = self.receiver(name, CLAIMD_API_KEY=key)
            answer = self.slack.post(other.url, event_body(bad))
            self.assertEqual(answer.status, 500, answer.body)
            self.assertIsNone(answer.headers.get("X-Slack-No-Retry"), "Slack must retry")
            self.assertIn("UNAUTHENTICATED", other.log())
            self.assertNotIn(wrong_key, other.log())
        self.assertEqual(len(self.replies(good)), 1)
        self.assertEqual(self.replies(bad), [])


if __name__ == "__main__":
    unittest.main()
