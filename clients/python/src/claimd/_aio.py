"""The asyncio client: `AsyncClaims` on a grpc.aio channel, and `AsyncLease`.

The same shape as the blocking client (`claimd._sync`): `await claims.claim(...)` returns
an `AsyncLease` for CLAIMED and an `Answer` otherwise; the lease heartbeats in an asyncio
task every third of its length, `lost` is an `asyncio.Event`, the holder calls are
coroutines, and `async with lease:` completes it with `lease.response` when the block ends
and retries it when the block raises. Create the client inside a running event loop.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import grpc
import grpc.aio

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


class AsyncClaims:
    """A client of claimd's ClaimService at `target` on a grpc.aio channel.

    The arguments are those of `claimd.Claims`. Methods are coroutines and raise
    `ClaimdError`. Close it with `await claims.close()` or use `async with`.
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
            self._channel = grpc.aio.insecure_channel(target, options=channel_options)
        else:
            self._channel = grpc.aio.secure_channel(
                target, credentials, options=channel_options
            )
        self.target = target
        self.timeout = timeout
        self._metadata = _common.call_metadata(api_key)
        self.stub: Any = claims_pb2_grpc.ClaimServiceStub(self._channel)  # type: ignore[no-untyped-call]
        """The generated ClaimService stub on the aio channel (calls are awaitables). Pass
        `metadata=` yourself: the API key is only added by this class's methods."""

    def __repr__(self) -> str:
        key = "set" if self._metadata else "none"
        return f"AsyncClaims({self.target!r}, api_key={key})"

    async def __aenter__(self) -> AsyncClaims:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the channel; leases still held stop heartbeating at their next beat."""
        await self._channel.close()

    async def _call(self, method: Any, request: object, timeout: float | None) -> Any:
        """Awaits `method` of the stub with the deadline and the API key."""
        try:
            return await method(
                request,
                timeout=self.timeout if timeout is None else timeout,
                metadata=_common.traced(self._metadata),
            )
        except grpc.RpcError as error:
            raise ClaimdError.from_rpc_error(error) from None

    async def claim(
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
    ) -> AsyncLease | Answer:
        """`claimd.Claims.claim`, awaited: an `AsyncLease` for CLAIMED, else an `Answer`."""
        request = _common.claim_request(
            namespace, key, fingerprint, lease, recovery_payload, delivery_attempt, wait
        )
        deadline = _common.claim_timeout(self.timeout if timeout is None else timeout, wait)
        response: claims_pb2.ClaimResponse = await self._call(self.stub.Claim, request, deadline)
        try:
            decision = _common.decision_of(response)
        except ValueError:
            raise ClaimdError(
                grpc.StatusCode.UNKNOWN, f"claimd answered an unknown decision {response.decision}"
            ) from None
        if decision is Decision.CLAIMED:
            return AsyncLease(self, namespace, key, response.claim_token, response.receipt, lease)
        return Answer(decision, response.receipt)

    async def get(
        self, namespace: str, key: str, *, timeout: float | None = None
    ) -> claims_pb2.Receipt:
        """The receipt of `key` in `namespace`; NOT_FOUND when there is none."""
        request = claims_pb2.GetRequest(namespace=namespace, key=key)
        response: claims_pb2.GetResponse = await self._call(self.stub.Get, request, timeout)
        return response.receipt

    async def list(
        self,
        namespace: str = "",
        states: Sequence[int] = (),
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> claims_pb2.ListResponse:
        """One page of receipts (`claimd.Claims.list`)."""
        request = _common.list_request(namespace, states, page_size, page_token)
        response: claims_pb2.ListResponse = await self._call(self.stub.List, request, timeout)
        return response

    async def list_orphaned(
        self,
        namespace: str = "",
        *,
        page_size: int = 0,
        page_token: str = "",
        overdue_by: Seconds | None = None,
        timeout: float | None = None,
    ) -> claims_pb2.ListOrphanedResponse:
        """One page of orphans (`claimd.Claims.list_orphaned`)."""
        request = _common.list_orphaned_request(namespace, page_size, page_token, overdue_by)
        response: claims_pb2.ListOrphanedResponse = await self._call(
            self.stub.ListOrphaned, request, timeout
        )
        return response

    async def redrive(
        self, namespace: str, key: str, *, timeout: float | None = None
    ) -> claims_pb2.Receipt:
        """Gives a dead letter a fresh attempt budget (`claimd.Claims.redrive`)."""
        request = claims_pb2.RedriveRequest(namespace=namespace, key=key)
        response: claims_pb2.RedriveResponse = await self._call(
            self.stub.Redrive, request, timeout
        )
        return response.receipt


class AsyncLease:
    """A claim this task holds, heartbeating in an asyncio task; `claimd.Lease`'s
    attributes, with `lost` an `asyncio.Event` and the calls coroutines.

    `async with lease:` completes it with `lease.response` when the block ends, retries it
    (the exception's type name as the error) when the block raises an Exception, and only
    stops the heartbeats for other BaseExceptions (asyncio.CancelledError among them): the
    lease then runs out and a recovery worker takes over.
    """

    decision = Decision.CLAIMED

    def __init__(
        self,
        claims: AsyncClaims,
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
        self.lost = asyncio.Event()
        self.lost_error: ClaimdError | None = None
        self.lease_seconds = _common.lease_seconds(lease, receipt)
        self._claims = claims
        self._token = token
        self._ttl = lease
        self._settled: str | None = None
        self._settle_lock = asyncio.Lock()
        # The task holds the lease weakly, as the sync lease's thread does.
        self._task: asyncio.Task[None] = asyncio.get_running_loop().create_task(
            _beat(weakref.ref(self), self.lease_seconds / 3), name="claimd heartbeat"
        )

    def __repr__(self) -> str:
        state = self._settled or ("lost" if self.lost.is_set() else "held")
        return (
            f"AsyncLease(namespace={self.namespace!r}, key={self.key!r}, "
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

    async def _holder_call(self, method: Any, request: object, timeout: float | None) -> Any:
        try:
            return await self._claims._call(method, request, timeout)
        except ClaimdError as error:
            if error.code in LOST_CODES:
                self.lost_error = error
                self.lost.set()
            raise

    async def heartbeat(self, checkpoint: bytes | None = None) -> claims_pb2.Receipt:
        """Renews the lease now (and stores `checkpoint` if given); ClaimdError ABORTED
        (and `lost` set) when someone else holds the work."""
        if self._settled:
            raise RuntimeError(f"this lease is already settled ({self._settled})")
        return await self._heartbeat(checkpoint, None)

    async def _heartbeat(
        self, checkpoint: bytes | None, timeout: float | None
    ) -> claims_pb2.Receipt:
        request = _common.heartbeat_request(
            self.namespace, self.key, self._token, self._ttl, checkpoint
        )
        response: claims_pb2.HeartbeatResponse = await self._holder_call(
            self._claims.stub.Heartbeat, request, timeout
        )
        self.receipt = response.receipt
        return self.receipt

    async def checkpoint(self, data: bytes) -> claims_pb2.Receipt:
        """Stores `data` as the checkpoint and renews the lease (`claimd.Lease.checkpoint`)."""
        return await self.heartbeat(data)

    async def stop(self) -> None:
        """Stops the heartbeats without settling (`claimd.Lease.stop`)."""
        if not self._task.done() and self._task is not asyncio.current_task():
            self._task.cancel()
            # wait() never raises the task's CancelledError, but passes on our own.
            await asyncio.wait([self._task])

    async def _settle(self, outcome: str, method: Any, request: object) -> Any:
        async with self._settle_lock:
            if self._settled:
                raise RuntimeError(f"this lease is already settled ({self._settled})")
            await self.stop()
            answer = await self._holder_call(method, request, None)
            self._settled = outcome
            return answer

    async def complete(self, response: bytes = b"") -> claims_pb2.Receipt:
        """Marks the work done and stores `response` (`claimd.Lease.complete`)."""
        request = claims_pb2.CompleteRequest(
            namespace=self.namespace, key=self.key, claim_token=self._token, response=response
        )
        answer: claims_pb2.CompleteResponse = await self._settle(
            "completed", self._claims.stub.Complete, request
        )
        self.receipt = answer.receipt
        return self.receipt

    async def retry(
        self, error: str, retry_after: Seconds | None = None, count_attempt: bool = True
    ) -> claims_pb2.Receipt:
        """Gives the work back to be claimed again later (`claimd.Lease.retry`)."""
        request = _common.retry_request(
            self.namespace, self.key, self._token, error, retry_after, count_attempt
        )
        answer: claims_pb2.RetryResponse = await self._settle(
            "retried", self._claims.stub.Retry, request
        )
        self.receipt = answer.receipt
        return self.receipt

    async def quarantine(self, error: str) -> claims_pb2.Receipt:
        """Moves the receipt to the dead letter state (`claimd.Lease.quarantine`)."""
        request = claims_pb2.QuarantineRequest(
            namespace=self.namespace, key=self.key, claim_token=self._token, error=error
        )
        answer: claims_pb2.QuarantineResponse = await self._settle(
            "quarantined", self._claims.stub.Quarantine, request
        )
        self.receipt = answer.receipt
        return self.receipt

    async def __aenter__(self) -> AsyncLease:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._settled:
            return
        if exc is None:
            await self.complete(self.response)
            return
        if not isinstance(exc, Exception) or self.lost.is_set():
            await self.stop()
            return
        try:
            await self.retry(_common.settle_error_text(exc))
        except ClaimdError as error:
            log.warning("claimd: could not retry the lease after %s: %s",
                        type(exc).__name__, error.code.name)


async def _beat(ref: weakref.ref[AsyncLease], interval: float) -> None:
    """The heartbeat task: a heartbeat every `interval` seconds until it is cancelled, the
    lease is lost, or nobody references the lease any more."""
    while True:
        await asyncio.sleep(interval)
        lease = ref()
        if lease is None:
            return
        try:
            await lease._heartbeat(None, max(1.0, interval))
        except ClaimdError as error:
            if lease.lost.is_set():
                log.warning("claimd: lease lost (%s): another holder has the work",
                            error.code.name)
                return
            log.warning("claimd: a heartbeat failed (%s); trying again in %.1f s",
                        error.code.name, interval)
        except grpc.aio.UsageError:  # the channel was closed
            log.warning("claimd: the client was closed; heartbeats stop")
            return
        finally:
            del lease
