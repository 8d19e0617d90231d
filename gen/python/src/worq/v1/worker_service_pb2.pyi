import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from worq.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class QueueOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUEUE_ORDER_UNSPECIFIED: _ClassVar[QueueOrder]
    QUEUE_ORDER_LISTED: _ClassVar[QueueOrder]
    QUEUE_ORDER_RANDOM: _ClassVar[QueueOrder]

class ControlAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONTROL_ACTION_UNSPECIFIED: _ClassVar[ControlAction]
    CONTROL_ACTION_RECONNECT: _ClassVar[ControlAction]
    CONTROL_ACTION_QUIET: _ClassVar[ControlAction]
    CONTROL_ACTION_TERMINATE: _ClassVar[ControlAction]
QUEUE_ORDER_UNSPECIFIED: QueueOrder
QUEUE_ORDER_LISTED: QueueOrder
QUEUE_ORDER_RANDOM: QueueOrder
CONTROL_ACTION_UNSPECIFIED: ControlAction
CONTROL_ACTION_RECONNECT: ControlAction
CONTROL_ACTION_QUIET: ControlAction
CONTROL_ACTION_TERMINATE: ControlAction

class LeaseRequest(_message.Message):
    __slots__ = ("queues", "worker_id", "credits", "labels", "order", "report_waiting")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    REPORT_WAITING_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedScalarFieldContainer[str]
    worker_id: str
    credits: int
    labels: _containers.ScalarMap[str, str]
    order: QueueOrder
    report_waiting: bool
    def __init__(self, queues: _Optional[_Iterable[str]] = ..., worker_id: _Optional[str] = ..., credits: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., order: _Optional[_Union[QueueOrder, str]] = ..., report_waiting: _Optional[bool] = ...) -> None: ...

class LeaseResponse(_message.Message):
    __slots__ = ("jobs", "keepalive", "control", "revoked", "waiting")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    KEEPALIVE_FIELD_NUMBER: _ClassVar[int]
    CONTROL_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    jobs: LeasedJobs
    keepalive: Keepalive
    control: Control
    revoked: Revoked
    waiting: Waiting
    def __init__(self, jobs: _Optional[_Union[LeasedJobs, _Mapping]] = ..., keepalive: _Optional[_Union[Keepalive, _Mapping]] = ..., control: _Optional[_Union[Control, _Mapping]] = ..., revoked: _Optional[_Union[Revoked, _Mapping]] = ..., waiting: _Optional[_Union[Waiting, _Mapping]] = ...) -> None: ...

class Waiting(_message.Message):
    __slots__ = ("waiting",)
    WAITING_FIELD_NUMBER: _ClassVar[int]
    waiting: bool
    def __init__(self, waiting: _Optional[bool] = ...) -> None: ...

class Revoked(_message.Message):
    __slots__ = ("jid", "lease_id", "reason")
    JID_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    jid: str
    lease_id: str
    reason: str
    def __init__(self, jid: _Optional[str] = ..., lease_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class LeasedJobs(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[LeasedJob]
    def __init__(self, jobs: _Optional[_Iterable[_Union[LeasedJob, _Mapping]]] = ...) -> None: ...

class LeasedJob(_message.Message):
    __slots__ = ("job", "lease_id", "lease_expires_at", "execution_deadline")
    JOB_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_DEADLINE_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    lease_id: str
    lease_expires_at: _timestamp_pb2.Timestamp
    execution_deadline: _timestamp_pb2.Timestamp
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., lease_id: _Optional[str] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., execution_deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Keepalive(_message.Message):
    __slots__ = ("stream_id",)
    STREAM_ID_FIELD_NUMBER: _ClassVar[int]
    stream_id: str
    def __init__(self, stream_id: _Optional[str] = ...) -> None: ...

class Control(_message.Message):
    __slots__ = ("action", "reason")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    action: ControlAction
    reason: str
    def __init__(self, action: _Optional[_Union[ControlAction, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class AckRequest(_message.Message):
    __slots__ = ("jid", "lease_id", "result")
    JID_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    jid: str
    lease_id: str
    result: bytes
    def __init__(self, jid: _Optional[str] = ..., lease_id: _Optional[str] = ..., result: _Optional[bytes] = ...) -> None: ...

class AckResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FailRequest(_message.Message):
    __slots__ = ("jid", "lease_id", "message", "errtype", "backtrace", "category", "retry_after", "code", "cause", "result")
    JID_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERRTYPE_FIELD_NUMBER: _ClassVar[int]
    BACKTRACE_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    jid: str
    lease_id: str
    message: str
    errtype: str
    backtrace: _containers.RepeatedScalarFieldContainer[str]
    category: _job_pb2.FailureCategory
    retry_after: _duration_pb2.Duration
    code: str
    cause: str
    result: bytes
    def __init__(self, jid: _Optional[str] = ..., lease_id: _Optional[str] = ..., message: _Optional[str] = ..., errtype: _Optional[str] = ..., backtrace: _Optional[_Iterable[str]] = ..., category: _Optional[_Union[_job_pb2.FailureCategory, str]] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., code: _Optional[str] = ..., cause: _Optional[str] = ..., result: _Optional[bytes] = ...) -> None: ...

class FailResponse(_message.Message):
    __slots__ = ("state", "retry_at")
    STATE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AT_FIELD_NUMBER: _ClassVar[int]
    state: _job_pb2.JobState
    retry_at: _timestamp_pb2.Timestamp
    def __init__(self, state: _Optional[_Union[_job_pb2.JobState, str]] = ..., retry_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LeaseRef(_message.Message):
    __slots__ = ("jid", "lease_id", "execution_timeout")
    JID_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    jid: str
    lease_id: str
    execution_timeout: _duration_pb2.Duration
    def __init__(self, jid: _Optional[str] = ..., lease_id: _Optional[str] = ..., execution_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RenewRequest(_message.Message):
    __slots__ = ("leases",)
    LEASES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[LeaseRef]
    def __init__(self, leases: _Optional[_Iterable[_Union[LeaseRef, _Mapping]]] = ...) -> None: ...

class RenewResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RenewResult]
    def __init__(self, results: _Optional[_Iterable[_Union[RenewResult, _Mapping]]] = ...) -> None: ...

class RenewResult(_message.Message):
    __slots__ = ("jid", "code", "message", "lease_expires_at")
    JID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    jid: str
    code: int
    message: str
    lease_expires_at: _timestamp_pb2.Timestamp
    def __init__(self, jid: _Optional[str] = ..., code: _Optional[int] = ..., message: _Optional[str] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ReportRequest(_message.Message):
    __slots__ = ("acks", "fails")
    ACKS_FIELD_NUMBER: _ClassVar[int]
    FAILS_FIELD_NUMBER: _ClassVar[int]
    acks: _containers.RepeatedCompositeFieldContainer[AckRequest]
    fails: _containers.RepeatedCompositeFieldContainer[FailRequest]
    def __init__(self, acks: _Optional[_Iterable[_Union[AckRequest, _Mapping]]] = ..., fails: _Optional[_Iterable[_Union[FailRequest, _Mapping]]] = ...) -> None: ...

class ReportResponse(_message.Message):
    __slots__ = ("acks", "fails")
    ACKS_FIELD_NUMBER: _ClassVar[int]
    FAILS_FIELD_NUMBER: _ClassVar[int]
    acks: _containers.RepeatedCompositeFieldContainer[ItemResult]
    fails: _containers.RepeatedCompositeFieldContainer[ItemResult]
    def __init__(self, acks: _Optional[_Iterable[_Union[ItemResult, _Mapping]]] = ..., fails: _Optional[_Iterable[_Union[ItemResult, _Mapping]]] = ...) -> None: ...

class ItemResult(_message.Message):
    __slots__ = ("jid", "code", "message", "state")
    JID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    jid: str
    code: int
    message: str
    state: _job_pb2.JobState
    def __init__(self, jid: _Optional[str] = ..., code: _Optional[int] = ..., message: _Optional[str] = ..., state: _Optional[_Union[_job_pb2.JobState, str]] = ...) -> None: ...

class CheckpointRequest(_message.Message):
    __slots__ = ("jid", "lease_id", "data")
    JID_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    jid: str
    lease_id: str
    data: bytes
    def __init__(self, jid: _Optional[str] = ..., lease_id: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class CheckpointResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReportProgressRequest(_message.Message):
    __slots__ = ("jid", "lease_id", "percent", "message")
    JID_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    PERCENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    jid: str
    lease_id: str
    percent: int
    message: str
    def __init__(self, jid: _Optional[str] = ..., lease_id: _Optional[str] = ..., percent: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class ReportProgressResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SetLeaseCreditsRequest(_message.Message):
    __slots__ = ("stream_id", "credits")
    STREAM_ID_FIELD_NUMBER: _ClassVar[int]
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    stream_id: str
    credits: int
    def __init__(self, stream_id: _Optional[str] = ..., credits: _Optional[int] = ...) -> None: ...

class SetLeaseCreditsResponse(_message.Message):
    __slots__ = ("held",)
    HELD_FIELD_NUMBER: _ClassVar[int]
    held: int
    def __init__(self, held: _Optional[int] = ...) -> None: ...
