import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Decision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECISION_UNSPECIFIED: _ClassVar[Decision]
    DECISION_CLAIMED: _ClassVar[Decision]
    DECISION_IN_FLIGHT: _ClassVar[Decision]
    DECISION_COMPLETED: _ClassVar[Decision]
    DECISION_RETRY_SCHEDULED: _ClassVar[Decision]
    DECISION_QUARANTINED: _ClassVar[Decision]
    DECISION_CONFLICT: _ClassVar[Decision]

class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STATE_UNSPECIFIED: _ClassVar[State]
    STATE_PROCESSING: _ClassVar[State]
    STATE_RETRY_WAIT: _ClassVar[State]
    STATE_COMPLETED: _ClassVar[State]
    STATE_QUARANTINED: _ClassVar[State]

class OrphanReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ORPHAN_REASON_UNSPECIFIED: _ClassVar[OrphanReason]
    ORPHAN_REASON_LEASE_EXPIRED: _ClassVar[OrphanReason]
    ORPHAN_REASON_RETRY_DUE: _ClassVar[OrphanReason]
DECISION_UNSPECIFIED: Decision
DECISION_CLAIMED: Decision
DECISION_IN_FLIGHT: Decision
DECISION_COMPLETED: Decision
DECISION_RETRY_SCHEDULED: Decision
DECISION_QUARANTINED: Decision
DECISION_CONFLICT: Decision
STATE_UNSPECIFIED: State
STATE_PROCESSING: State
STATE_RETRY_WAIT: State
STATE_COMPLETED: State
STATE_QUARANTINED: State
ORPHAN_REASON_UNSPECIFIED: OrphanReason
ORPHAN_REASON_LEASE_EXPIRED: OrphanReason
ORPHAN_REASON_RETRY_DUE: OrphanReason

class Receipt(_message.Message):
    __slots__ = ("namespace", "key", "state", "attempt", "fingerprint", "lease_expires_at", "next_attempt_at", "created_at", "updated_at", "completed_at", "last_error", "checkpoint", "response", "recovery_payload", "response_pruned_at")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_PRUNED_AT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    state: State
    attempt: int
    fingerprint: bytes
    lease_expires_at: _timestamp_pb2.Timestamp
    next_attempt_at: _timestamp_pb2.Timestamp
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    completed_at: _timestamp_pb2.Timestamp
    last_error: str
    checkpoint: bytes
    response: bytes
    recovery_payload: bytes
    response_pruned_at: _timestamp_pb2.Timestamp
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., state: _Optional[_Union[State, str]] = ..., attempt: _Optional[int] = ..., fingerprint: _Optional[bytes] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., next_attempt_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., completed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ..., checkpoint: _Optional[bytes] = ..., response: _Optional[bytes] = ..., recovery_payload: _Optional[bytes] = ..., response_pruned_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ClaimRequest(_message.Message):
    __slots__ = ("namespace", "key", "fingerprint", "lease_ttl", "recovery_payload", "delivery_attempt", "wait")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    fingerprint: bytes
    lease_ttl: _duration_pb2.Duration
    recovery_payload: bytes
    delivery_attempt: int
    wait: _duration_pb2.Duration
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., fingerprint: _Optional[bytes] = ..., lease_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., recovery_payload: _Optional[bytes] = ..., delivery_attempt: _Optional[int] = ..., wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ClaimResponse(_message.Message):
    __slots__ = ("decision", "claim_token", "receipt")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    CLAIM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    decision: Decision
    claim_token: str
    receipt: Receipt
    def __init__(self, decision: _Optional[_Union[Decision, str]] = ..., claim_token: _Optional[str] = ..., receipt: _Optional[_Union[Receipt, _Mapping]] = ...) -> None: ...

class CompleteRequest(_message.Message):
    __slots__ = ("namespace", "key", "claim_token", "response")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CLAIM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    claim_token: str
    response: bytes
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., claim_token: _Optional[str] = ..., response: _Optional[bytes] = ...) -> None: ...

class CompleteResponse(_message.Message):
    __slots__ = ("receipt",)
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    receipt: Receipt
    def __init__(self, receipt: _Optional[_Union[Receipt, _Mapping]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("namespace", "key", "claim_token", "lease_ttl", "checkpoint")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CLAIM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    claim_token: str
    lease_ttl: _duration_pb2.Duration
    checkpoint: bytes
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., claim_token: _Optional[str] = ..., lease_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., checkpoint: _Optional[bytes] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("receipt",)
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    receipt: Receipt
    def __init__(self, receipt: _Optional[_Union[Receipt, _Mapping]] = ...) -> None: ...

class RetryRequest(_message.Message):
    __slots__ = ("namespace", "key", "claim_token", "error", "retry_after", "count_attempt")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CLAIM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    COUNT_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    claim_token: str
    error: str
    retry_after: _duration_pb2.Duration
    count_attempt: bool
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., claim_token: _Optional[str] = ..., error: _Optional[str] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., count_attempt: _Optional[bool] = ...) -> None: ...

class RetryResponse(_message.Message):
    __slots__ = ("receipt",)
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    receipt: Receipt
    def __init__(self, receipt: _Optional[_Union[Receipt, _Mapping]] = ...) -> None: ...

class QuarantineRequest(_message.Message):
    __slots__ = ("namespace", "key", "claim_token", "error")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CLAIM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    claim_token: str
    error: str
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., claim_token: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class QuarantineResponse(_message.Message):
    __slots__ = ("receipt",)
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    receipt: Receipt
    def __init__(self, receipt: _Optional[_Union[Receipt, _Mapping]] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("namespace", "key")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("receipt",)
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    receipt: Receipt
    def __init__(self, receipt: _Optional[_Union[Receipt, _Mapping]] = ...) -> None: ...

class ListOrphanedRequest(_message.Message):
    __slots__ = ("namespace", "page_size", "page_token", "overdue_by")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OVERDUE_BY_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    page_size: int
    page_token: str
    overdue_by: _duration_pb2.Duration
    def __init__(self, namespace: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., overdue_by: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Orphan(_message.Message):
    __slots__ = ("receipt", "reason")
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    receipt: Receipt
    reason: OrphanReason
    def __init__(self, receipt: _Optional[_Union[Receipt, _Mapping]] = ..., reason: _Optional[_Union[OrphanReason, str]] = ...) -> None: ...

class ListOrphanedResponse(_message.Message):
    __slots__ = ("orphans", "next_page_token")
    ORPHANS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    orphans: _containers.RepeatedCompositeFieldContainer[Orphan]
    next_page_token: str
    def __init__(self, orphans: _Optional[_Iterable[_Union[Orphan, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("namespace", "states", "page_size", "page_token")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    states: _containers.RepeatedScalarFieldContainer[State]
    page_size: int
    page_token: str
    def __init__(self, namespace: _Optional[str] = ..., states: _Optional[_Iterable[_Union[State, str]]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("receipts", "next_page_token")
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    receipts: _containers.RepeatedCompositeFieldContainer[Receipt]
    next_page_token: str
    def __init__(self, receipts: _Optional[_Iterable[_Union[Receipt, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RedriveRequest(_message.Message):
    __slots__ = ("namespace", "key")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class RedriveResponse(_message.Message):
    __slots__ = ("receipt",)
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    receipt: Receipt
    def __init__(self, receipt: _Optional[_Union[Receipt, _Mapping]] = ...) -> None: ...
