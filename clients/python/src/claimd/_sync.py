"""The blocking client: `Claims` on a grpc channel, and `Lease`, a claim this process holds.

`Claims.claim` returns a `Lease` when claimd answers CLAIMED and an `Answer` (the
decision and its receipt) otherwise. A lease heartbeats in a background thread every
third of its length from the moment it is returned, sets `lost` when claimd says its token
is no longer current, and is settled once: `complete`, `retry` or `quarantine`. As a
context manager it settles itself: `complete(lease.response)` when the block ends, a
`retry` when the block raises.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import grpc

from claimd import _common
from claimd._common import (
    DEFAULT_TIMEOUT,
    LOST_CODES,
    Answer,
    ChannelOptions,
    Decision,
    Seconds,
    TLSOption,
)
from claimd._errors import ClaimdError
from claimd.v1 import claims_pb2, claims_pb2_grpc

log = logging.getLogger("claimd")


class Claims:
    """A client of claimd's ClaimService at `target` (`host:port`).

    `api_key` is sent as `authorization: Bearer <key>` with every call (None or empty: no
    key, which claimd accepts on loopback until the first key exists). `tls` is None or
    False for plaintext, True for TLS with the system's roots, a `claimd.TLS` for your own
    CA and client certificates, or `grpc.ChannelCredentials`. `timeout` is every call's
    deadline in seconds unless the call gives its own. Methods raise `ClaimdError`.
    Thread-safe; close it (or use it as a context manager) when done.
    """

    def __init__(
        self,
        target: str,
        api_key: str | None = None,
        tls: TLSOption = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        options: ChannelOptions = (),
    ) -> None:
        credentials = _common.channel_credentials(tls)
        channel_options = _common.channel_options(tls, options)
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=channel_options)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=channel_options)
        self.target = target
        self.timeout = timeout
        self._metadata = _common.call_metadata(api_key)
        self.stub: Any = claims_pb2_grpc.ClaimServiceStub(self._channel)  # type: ignore[no-untyped-call]
        """The generated ClaimService stub, for what the methods here do not cover. Pass
        `metadata=` yourself: the API key is only added by this class's methods."""

    def __repr__(self) -> str:
        key = "set" if self._metadata else "none"
        return f"Claims({self.target!r}, api_key={key})"

    def __enter__(self) -> Claims:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the channel; leases still held stop heartbeating at their next beat."""
        self._channel.close()

    def _call(self, method: Any, request: object, timeout: float | None) -> Any:
        """Calls `method` of the stub with the deadline and the API key."""
        try:
            return method(
                request,
                timeout=self.timeout if timeout is None else timeout,
                metadata=_common.traced(self._metadata),
            )
        except grpc.RpcError as error:
            raise ClaimdError.from_rpc_error(error) from None

    def claim(
        self,
        namespace: str,
        key: str,
        fingerprint: bytes,
        *,
        lease: Seconds | None = None,
        recovery_payload: bytes = b"",
        delivery_attempt: int = 0,
        wait: Seconds | None = None,
        timeout: float | None = None,
    ) -> Lease | Answer:
        """Asks whether this caller may do the work for the event `key` in `namespace`.

        `fingerprint` is the caller's digest of the payload (at most 64 bytes): the same key
        with another fingerprint is CONFLICT. `lease` is the lease's length (1 s to 24 h;
        None: the namespace's). `recovery_payload` (at most 64 KiB) is kept and returned
        to whoever takes the work over. `delivery_attempt` is the platform's retry number,
        a hint for metrics only. `wait` (0 to 60 s) holds an IN_FLIGHT answer until the
        receipt settles (docs/DESIGN.md §2.9); the call's deadline grows by it.

        Returns a heartbeating `Lease` for CLAIMED, else an `Answer`.
        """
        request = _common.claim_request(
            namespace, key, fingerprint, lease, recovery_payload, delivery_attempt, wait
        )
        deadline = _common.claim_timeout(self.timeout if timeout is None else timeout, wait)
        response: claims_pb2.ClaimResponse = self._call(self.stub.Claim, request, deadline)
        try:
            decision = _common.decision_of(response)
        except ValueError:
            raise ClaimdError(
                grpc.StatusCode.UNKNOWN, f"claimd answered an unknown decision {response.decision}"
            ) from None
        if decision is Decision.CLAIMED:
            return Lease(self, namespace, key, response.claim_token, response.receipt, lease)
        return Answer(decision, response.receipt)

    def get(self, namespace: str, key: str, *, timeout: float | None = None) -> claims_pb2.Receipt:
        """The receipt of `key` in `namespace`; NOT_FOUND when there is none."""
        request = claims_pb2.GetRequest(namespace=namespace, key=key)
        response: claims_pb2.GetResponse = self._call(self.stub.Get, request, timeout)
        return response.receipt

    def list(
        self,
        namespace: str = "",
        states: Sequence[int] = (),
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> claims_pb2.ListResponse:
        """One page of receipts in (namespace, key) order, only `states` if given
        (`[State.QUARANTINED]`: the dead letters); pass `next_page_token` on for the next."""
        request = _common.list_request(namespace, states, page_size, page_token)
        response: claims_pb2.ListResponse = self._call(self.stub.List, request, timeout)
        return response

    def list_orphaned(
        self,
        namespace: str = "",
        *,
        page_size: int = 0,
        page_token: str = "",
        overdue_by: Seconds | None = None,
        timeout: float | None = None,
    ) -> claims_pb2.ListOrphanedResponse:
        """One page of receipts nobody works on (expired leases, due retries), oldest due
        first; claim one to take it over."""
        request = _common.list_orphaned_request(namespace, page_size, page_token, overdue_by)
        response: claims_pb2.ListOrphanedResponse = self._call(
            self.stub.ListOrphaned, request, timeout
        )
        return response

    def redrive(
        self, namespace: str, key: str, *, timeout: float | None = None
    ) -> claims_pb2.Receipt:
        """Gives a dead letter (QUARANTINED) a fresh attempt budget: RETRY_WAIT, due now."""
        request = claims_pb2.RedriveRequest(namespace=namespace, key=key)
        response: claims_pb2.RedriveResponse = self._call(self.stub.Redrive, request, timeout)
        return response.receipt


class Lease:
    """A claim this process holds (the decision CLAIMED), heartbeating in the background.

    `receipt` is the receipt at the claim (and after each heartbeat and the settle): its
    `attempt` is the fencing number, `recovery_payload` and `checkpoint` what earlier
    holders left. `lost` is set when claimd answers a heartbeat, checkpoint or settle with
    ABORTED (someone else holds the work now), NOT_FOUND or FAILED_PRECONDITION; then
    `lost_error` holds that error and the work must stop. Settle exactly once.

    As a context manager: when the block ends, `complete(lease.response)` (set
    `lease.response = b"…"` inside the block; empty by default); when it raises an
    Exception, `retry` with the exception's type name as the error (never its message) and
    the exception propagates; a lease settled inside the block is left as it is. Other
    BaseExceptions (KeyboardInterrupt, SystemExit) only stop the heartbeats: the lease
    runs out and a recovery worker takes over.
    """

    decision = Decision.CLAIMED

    def __init__(
        self,
        claims: Claims,
        namespace: str,
        key: str,
        token: str,
        receipt: claims_pb2.Receipt,
        lease: Seconds | None,
    ) -> None:
        self.namespace = namespace
        self.key = key
        self.receipt = receipt
        self.response = b""
        self.lost = threading.Event()
        self.lost_error: ClaimdError | None = None
        self.lease_seconds = _common.lease_seconds(lease, receipt)
        self._claims = claims
        self._token = token
        self._ttl = lease
        self._settled: str | None = None
        self._settle_lock = threading.Lock()
        self._stop = threading.Event()
        # The thread holds the lease weakly: a lease nobody can settle any more stops
        # heartbeating instead of keeping its event from the recovery workers forever.
        self._thread = threading.Thread(
            target=_beat,
            args=(weakref.ref(self), self._stop, self.lease_seconds / 3),
            name="claimd heartbeat",
            daemon=True,
        )
        self._thread.start()

    def __repr__(self) -> str:
        state = self._settled or ("lost" if self.lost.is_set() else "held")
        return (
            f"Lease(namespace={self.namespace!r}, key={self.key!r}, "
            f"attempt={self.attempt}, {state})"
        )

    @property
    def attempt(self) -> int:
        """This claim's attempt number: a fencing number that only rises."""
        return self.receipt.attempt

    @property
    def settled(self) -> bool:
        """Whether complete, retry or quarantine succeeded."""
        return self._settled is not None

    def _holder_call(self, method: Any, request: object, timeout: float | None) -> Any:
        try:
            return self._claims._call(method, request, timeout)
        except ClaimdError as error:
            if error.code in LOST_CODES:
                self.lost_error = error
                self.lost.set()
            raise

    def heartbeat(self, checkpoint: bytes | None = None) -> claims_pb2.Receipt:
        """Renews the lease now (and stores `checkpoint` if given); raises ClaimdError,
        ABORTED when someone else holds the work (and sets `lost`)."""
        if self._settled:
            raise RuntimeError(f"this lease is already settled ({self._settled})")
        return self._heartbeat(checkpoint, None)

    def _heartbeat(self, checkpoint: bytes | None, timeout: float | None) -> claims_pb2.Receipt:
        request = _common.heartbeat_request(
            self.namespace, self.key, self._token, self._ttl, checkpoint
        )
        response: claims_pb2.HeartbeatResponse = self._holder_call(
            self._claims.stub.Heartbeat, request, timeout
        )
        self.receipt = response.receipt
        return self.receipt

    def checkpoint(self, data: bytes) -> claims_pb2.Receipt:
        """Stores `data` as the checkpoint (kept across retries and takeovers) and renews the
        lease, synchronously: the last check before a side effect. Raises ClaimdError
        (ABORTED, and sets `lost`) if someone else holds the work now."""
        return self.heartbeat(data)

    def stop(self) -> None:
        """Stops the heartbeats without settling: the lease runs out and a recovery worker
        (ListOrphaned, then Claim) takes the work over. Settling stops them too."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _settle(self, outcome: str, method: Any, request: object) -> Any:
        with self._settle_lock:
            if self._settled:
                raise RuntimeError(f"this lease is already settled ({self._settled})")
            self.stop()  # no heartbeat may follow the settle
            answer = self._holder_call(method, request, None)
            self._settled = outcome
            return answer

    def complete(self, response: bytes = b"") -> claims_pb2.Receipt:
        """Marks the work done and stores `response` (at most 64 KiB) for claimd to replay to
        every later delivery. A failed call (UNAVAILABLE) may be tried again."""
        request = claims_pb2.CompleteRequest(
            namespace=self.namespace, key=self.key, claim_token=self._token, response=response
        )
        answer: claims_pb2.CompleteResponse = self._settle("completed", self._claims.stub.Complete, request)
        self.receipt = answer.receipt
        return self.receipt

    def retry(
        self, error: str, retry_after: Seconds | None = None, count_attempt: bool = True
    ) -> claims_pb2.Receipt:
        """Gives the work back, to be claimed again after `retry_after` (1 s to 24 h; None:
        claimd's backoff). `error` is kept as last_error: never put a secret or a payload
        in it. `count_attempt=False` (the platform said "wait", e.g. HTTP 429) leaves the
        attempt budget as it is. The receipt is RETRY_WAIT, or QUARANTINED when the
        budget is spent."""
        request = _common.retry_request(
            self.namespace, self.key, self._token, error, retry_after, count_attempt
        )
        answer: claims_pb2.RetryResponse = self._settle("retried", self._claims.stub.Retry, request)
        self.receipt = answer.receipt
        return self.receipt

    def quarantine(self, error: str) -> claims_pb2.Receipt:
        """Moves the receipt to the dead letter state at once (a permanent failure);
        `error` is kept as last_error."""
        request = claims_pb2.QuarantineRequest(
            namespace=self.namespace, key=self.key, claim_token=self._token, error=error
        )
        answer: claims_pb2.QuarantineResponse = self._settle("quarantined", self._claims.stub.Quarantine, request)
        self.receipt = answer.receipt
        return self.receipt

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._settled:
            return
        if exc is None:
            self.complete(self.response)
            return
        if not isinstance(exc, Exception) or self.lost.is_set():
            self.stop()
            return
        try:
            self.retry(_common.settle_error_text(exc))
        except ClaimdError as error:
            log.warning("claimd: could not retry the lease after %s: %s",
                        type(exc).__name__, error.code.name)


def _beat(ref: weakref.ref[Lease], stop: threading.Event, interval: float) -> None:
    """The heartbeat thread: a heartbeat every `interval` seconds until `stop` is set, the
    lease is lost, or nobody references the lease any more."""
    while not stop.wait(interval):
        lease = ref()
        if lease is None:
            return
        try:
            lease._heartbeat(None, max(1.0, interval))
        except ClaimdError as error:
            if lease.lost.is_set():
                log.warning("claimd: lease lost (%s): another holder has the work",
                            error.code.name)
                return
            # Transient (UNAVAILABLE, DEADLINE_EXCEEDED): the lease may still run.
            log.warning("claimd: a heartbeat failed (%s); trying again in %.1f s",
                        error.code.name, interval)
        except ValueError:  # the channel was closed
            log.warning("claimd: the client was closed; heartbeats stop")
            return
        finally:
            del lease
