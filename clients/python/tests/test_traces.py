"""The caller's OpenTelemetry context goes with every call (issue 32): inside a span the
metadata carries its `traceparent` (and `tracestate`), never `baggage`; outside a span, or
without the OpenTelemetry API, nothing is added. That claimd then continues the trace is
tested from claimd's side (the Rust suite's `polyglot::traces`, with a real collector)."""

from __future__ import annotations

import pytest
from opentelemetry import baggage, context, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from claimd import _common

TRACE = 0x4BF92F3577B34DA6A3CE929D0E0E4736
SPAN = 0x00F067AA0BA902B7
KEY = (("authorization", "Bearer the-key"),)


def current(trace_state: TraceState | None = None) -> NonRecordingSpan:
    """A sampled span of a known trace, as the caller's SDK would have made current."""
    ids = SpanContext(
        trace_id=TRACE,
        span_id=SPAN,
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=trace_state,
    )
    return NonRecordingSpan(ids)


def test_inside_a_span_a_call_carries_its_traceparent_and_never_baggage() -> None:
    token = context.attach(baggage.set_baggage("user", "not-for-claimd"))
    try:
        with trace.use_span(current(TraceState([("vendor", "value")]))):
            metadata = dict(_common.traced(KEY))
    finally:
        context.detach(token)
    assert metadata["traceparent"] == f"00-{TRACE:032x}-{SPAN:016x}-01"
    assert metadata["tracestate"] == "vendor=value"
    assert metadata["authorization"] == "Bearer the-key"
    assert "baggage" not in metadata


def test_outside_a_span_nothing_is_added() -> None:
    assert _common.traced(KEY) == KEY


def test_without_the_opentelemetry_api_nothing_is_added(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_common, "_propagate", None)
    with trace.use_span(current()):
        assert _common.traced(KEY) == KEY
