"""Scenario tests of the Slack receiver; see harness.py and ../README.md."""
