import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_PENDING: _ClassVar[JobState]
    JOB_STATE_SCHEDULED: _ClassVar[JobState]
    JOB_STATE_DELAYED: _ClassVar[JobState]
    JOB_STATE_RUNNING: _ClassVar[JobState]
    JOB_STATE_RETRYING: _ClassVar[JobState]
    JOB_STATE_COMPLETED: _ClassVar[JobState]
    JOB_STATE_FAILED: _ClassVar[JobState]
    JOB_STATE_DEAD_LETTER: _ClassVar[JobState]
    JOB_STATE_CANCELLED: _ClassVar[JobState]

class Priority(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRIORITY_UNSPECIFIED: _ClassVar[Priority]
    PRIORITY_CRITICAL: _ClassVar[Priority]
    PRIORITY_HIGH: _ClassVar[Priority]
    PRIORITY_NORMAL: _ClassVar[Priority]
    PRIORITY_LOW: _ClassVar[Priority]
    PRIORITY_BULK: _ClassVar[Priority]

class FailureCategory(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAILURE_CATEGORY_UNSPECIFIED: _ClassVar[FailureCategory]
    FAILURE_CATEGORY_TEMPORARY: _ClassVar[FailureCategory]
    FAILURE_CATEGORY_PERMANENT: _ClassVar[FailureCategory]
    FAILURE_CATEGORY_TIMEOUT: _ClassVar[FailureCategory]
    FAILURE_CATEGORY_CANCELLED: _ClassVar[FailureCategory]
    FAILURE_CATEGORY_SYSTEM: _ClassVar[FailureCategory]
    FAILURE_CATEGORY_RATE_LIMITED: _ClassVar[FailureCategory]

class UniqueUntil(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNIQUE_UNTIL_UNSPECIFIED: _ClassVar[UniqueUntil]
    UNIQUE_UNTIL_WINDOW: _ClassVar[UniqueUntil]
    UNIQUE_UNTIL_STARTED: _ClassVar[UniqueUntil]
    UNIQUE_UNTIL_FINISHED: _ClassVar[UniqueUntil]

class BackoffStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BACKOFF_STRATEGY_UNSPECIFIED: _ClassVar[BackoffStrategy]
    BACKOFF_STRATEGY_CONSTANT: _ClassVar[BackoffStrategy]
    BACKOFF_STRATEGY_LINEAR: _ClassVar[BackoffStrategy]
    BACKOFF_STRATEGY_EXPONENTIAL: _ClassVar[BackoffStrategy]

class ExhaustedAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXHAUSTED_ACTION_UNSPECIFIED: _ClassVar[ExhaustedAction]
    EXHAUSTED_ACTION_DEAD_LETTER: _ClassVar[ExhaustedAction]
    EXHAUSTED_ACTION_DISCARD: _ClassVar[ExhaustedAction]

class DependencyType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEPENDENCY_TYPE_UNSPECIFIED: _ClassVar[DependencyType]
    DEPENDENCY_TYPE_AFTER: _ClassVar[DependencyType]
    DEPENDENCY_TYPE_AFTER_ANY: _ClassVar[DependencyType]
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_PENDING: JobState
JOB_STATE_SCHEDULED: JobState
JOB_STATE_DELAYED: JobState
JOB_STATE_RUNNING: JobState
JOB_STATE_RETRYING: JobState
JOB_STATE_COMPLETED: JobState
JOB_STATE_FAILED: JobState
JOB_STATE_DEAD_LETTER: JobState
JOB_STATE_CANCELLED: JobState
PRIORITY_UNSPECIFIED: Priority
PRIORITY_CRITICAL: Priority
PRIORITY_HIGH: Priority
PRIORITY_NORMAL: Priority
PRIORITY_LOW: Priority
PRIORITY_BULK: Priority
FAILURE_CATEGORY_UNSPECIFIED: FailureCategory
FAILURE_CATEGORY_TEMPORARY: FailureCategory
FAILURE_CATEGORY_PERMANENT: FailureCategory
FAILURE_CATEGORY_TIMEOUT: FailureCategory
FAILURE_CATEGORY_CANCELLED: FailureCategory
FAILURE_CATEGORY_SYSTEM: FailureCategory
FAILURE_CATEGORY_RATE_LIMITED: FailureCategory
UNIQUE_UNTIL_UNSPECIFIED: UniqueUntil
UNIQUE_UNTIL_WINDOW: UniqueUntil
UNIQUE_UNTIL_STARTED: UniqueUntil
UNIQUE_UNTIL_FINISHED: UniqueUntil
BACKOFF_STRATEGY_UNSPECIFIED: BackoffStrategy
BACKOFF_STRATEGY_CONSTANT: BackoffStrategy
BACKOFF_STRATEGY_LINEAR: BackoffStrategy
BACKOFF_STRATEGY_EXPONENTIAL: BackoffStrategy
EXHAUSTED_ACTION_UNSPECIFIED: ExhaustedAction
EXHAUSTED_ACTION_DEAD_LETTER: ExhaustedAction
EXHAUSTED_ACTION_DISCARD: ExhaustedAction
DEPENDENCY_TYPE_UNSPECIFIED: DependencyType
DEPENDENCY_TYPE_AFTER: DependencyType
DEPENDENCY_TYPE_AFTER_ANY: DependencyType

class Uniqueness(_message.Message):
    __slots__ = ("key", "until", "window")
    KEY_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    key: str
    until: UniqueUntil
    window: _duration_pb2.Duration
    def __init__(self, key: _Optional[str] = ..., until: _Optional[_Union[UniqueUntil, str]] = ..., window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Debounce(_message.Message):
    __slots__ = ("key", "delay")
    KEY_FIELD_NUMBER: _ClassVar[int]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    key: str
    delay: _duration_pb2.Duration
    def __init__(self, key: _Optional[str] = ..., delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("max_attempts", "max_fails", "backoff", "initial_delay", "multiplier", "max_delay", "jitter", "on_exhausted", "retry_timeout", "retry_system")
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    MAX_FAILS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_FIELD_NUMBER: _ClassVar[int]
    INITIAL_DELAY_FIELD_NUMBER: _ClassVar[int]
    MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    MAX_DELAY_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    ON_EXHAUSTED_FIELD_NUMBER: _ClassVar[int]
    RETRY_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    RETRY_SYSTEM_FIELD_NUMBER: _ClassVar[int]
    max_attempts: int
    max_fails: int
    backoff: BackoffStrategy
    initial_delay: _duration_pb2.Duration
    multiplier: float
    max_delay: _duration_pb2.Duration
    jitter: bool
    on_exhausted: ExhaustedAction
    retry_timeout: bool
    retry_system: bool
    def __init__(self, max_attempts: _Optional[int] = ..., max_fails: _Optional[int] = ..., backoff: _Optional[_Union[BackoffStrategy, str]] = ..., initial_delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., multiplier: _Optional[float] = ..., max_delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., jitter: _Optional[bool] = ..., on_exhausted: _Optional[_Union[ExhaustedAction, str]] = ..., retry_timeout: _Optional[bool] = ..., retry_system: _Optional[bool] = ...) -> None: ...

class Dependencies(_message.Message):
    __slots__ = ("type", "jids", "batch_refs", "children_of")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    JIDS_FIELD_NUMBER: _ClassVar[int]
    BATCH_REFS_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_OF_FIELD_NUMBER: _ClassVar[int]
    type: DependencyType
    jids: _containers.RepeatedScalarFieldContainer[str]
    batch_refs: _containers.RepeatedScalarFieldContainer[str]
    children_of: str
    def __init__(self, type: _Optional[_Union[DependencyType, str]] = ..., jids: _Optional[_Iterable[str]] = ..., batch_refs: _Optional[_Iterable[str]] = ..., children_of: _Optional[str] = ...) -> None: ...

class JobSpec(_message.Message):
    __slots__ = ("type", "queue", "args", "kwargs", "payload", "custom", "priority", "at", "delay", "reserve_for", "execution_timeout", "ttl", "retry", "backtrace", "idempotency_key", "depends_on", "batch_ref", "tags", "correlation_id", "parent_jid", "callback_url", "group_key", "unique", "debounce", "trace", "batch_id")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TYPE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    KWARGS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    RESERVE_FOR_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    BACKTRACE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    DEPENDS_ON_FIELD_NUMBER: _ClassVar[int]
    BATCH_REF_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_JID_FIELD_NUMBER: _ClassVar[int]
    CALLBACK_URL_FIELD_NUMBER: _ClassVar[int]
    GROUP_KEY_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_FIELD_NUMBER: _ClassVar[int]
    DEBOUNCE_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    type: str
    queue: str
    args: _struct_pb2.ListValue
    kwargs: _struct_pb2.Struct
    payload: bytes
    custom: _struct_pb2.Struct
    priority: Priority
    at: _timestamp_pb2.Timestamp
    delay: _duration_pb2.Duration
    reserve_for: _duration_pb2.Duration
    execution_timeout: _duration_pb2.Duration
    ttl: _duration_pb2.Duration
    retry: RetryPolicy
    backtrace: int
    idempotency_key: str
    depends_on: Dependencies
    batch_ref: str
    tags: _containers.ScalarMap[str, str]
    correlation_id: str
    parent_jid: str
    callback_url: str
    group_key: str
    unique: Uniqueness
    debounce: Debounce
    trace: TraceContext
    batch_id: str
    def __init__(self, type: _Optional[str] = ..., queue: _Optional[str] = ..., args: _Optional[_Union[_struct_pb2.ListValue, _Mapping]] = ..., kwargs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., payload: _Optional[bytes] = ..., custom: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., priority: _Optional[_Union[Priority, str]] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., reserve_for: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., execution_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., backtrace: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., depends_on: _Optional[_Union[Dependencies, _Mapping]] = ..., batch_ref: _Optional[str] = ..., tags: _Optional[_Mapping[str, str]] = ..., correlation_id: _Optional[str] = ..., parent_jid: _Optional[str] = ..., callback_url: _Optional[str] = ..., group_key: _Optional[str] = ..., unique: _Optional[_Union[Uniqueness, _Mapping]] = ..., debounce: _Optional[_Union[Debounce, _Mapping]] = ..., trace: _Optional[_Union[TraceContext, _Mapping]] = ..., batch_id: _Optional[str] = ...) -> None: ...

class Failure(_message.Message):
    __slots__ = ("failed_at", "retried_at", "retry_count", "message", "errtype", "backtrace", "category", "code", "cause")
    FAILED_AT_FIELD_NUMBER: _ClassVar[int]
    RETRIED_AT_FIELD_NUMBER: _ClassVar[int]
    RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERRTYPE_FIELD_NUMBER: _ClassVar[int]
    BACKTRACE_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    failed_at: _timestamp_pb2.Timestamp
    retried_at: _timestamp_pb2.Timestamp
    retry_count: int
    message: str
    errtype: str
    backtrace: _containers.RepeatedScalarFieldContainer[str]
    category: FailureCategory
    code: str
    cause: str
    def __init__(self, failed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., retried_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., retry_count: _Optional[int] = ..., message: _Optional[str] = ..., errtype: _Optional[str] = ..., backtrace: _Optional[_Iterable[str]] = ..., category: _Optional[_Union[FailureCategory, str]] = ..., code: _Optional[str] = ..., cause: _Optional[str] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("percent", "message", "updated_at")
    PERCENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    percent: int
    message: str
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, percent: _Optional[int] = ..., message: _Optional[str] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("jid", "type", "queue", "state", "attempt", "args", "kwargs", "payload", "custom", "priority", "at", "reserve_for", "execution_timeout", "retry", "backtrace", "tags", "correlation_id", "fails", "failure", "created_at", "enqueued_at", "scheduled_at", "started_at", "updated_at", "completed_at", "result", "previous_lease_ids", "lease_expires_at", "worker_id", "idempotency_key", "parent_jid", "dependency_type", "depends_on", "waiting_on", "children_of", "callback_url", "expires_at", "ttl", "checkpoint", "progress", "group_key", "unique_key", "unique_until", "debounce_key", "trace", "batch_id", "schedule", "scheduled_tick")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    KWARGS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    RESERVE_FOR_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    BACKTRACE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    FAILS_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ENQUEUED_AT_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_LEASE_IDS_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    PARENT_JID_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_TYPE_FIELD_NUMBER: _ClassVar[int]
    DEPENDS_ON_FIELD_NUMBER: _ClassVar[int]
    WAITING_ON_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_OF_FIELD_NUMBER: _ClassVar[int]
    CALLBACK_URL_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    GROUP_KEY_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_KEY_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_UNTIL_FIELD_NUMBER: _ClassVar[int]
    DEBOUNCE_KEY_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_TICK_FIELD_NUMBER: _ClassVar[int]
    jid: str
    type: str
    queue: str
    state: JobState
    attempt: int
    args: _struct_pb2.ListValue
    kwargs: _struct_pb2.Struct
    payload: bytes
    custom: _struct_pb2.Struct
    priority: Priority
    at: _timestamp_pb2.Timestamp
    reserve_for: _duration_pb2.Duration
    execution_timeout: _duration_pb2.Duration
    retry: RetryPolicy
    backtrace: int
    tags: _containers.ScalarMap[str, str]
    correlation_id: str
    fails: int
    failure: Failure
    created_at: _timestamp_pb2.Timestamp
    enqueued_at: _timestamp_pb2.Timestamp
    scheduled_at: _timestamp_pb2.Timestamp
    started_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    completed_at: _timestamp_pb2.Timestamp
    result: bytes
    previous_lease_ids: _containers.RepeatedScalarFieldContainer[str]
    lease_expires_at: _timestamp_pb2.Timestamp
    worker_id: str
    idempotency_key: str
    parent_jid: str
    dependency_type: DependencyType
    depends_on: _containers.RepeatedScalarFieldContainer[str]
    waiting_on: _containers.RepeatedScalarFieldContainer[str]
    children_of: str
    callback_url: str
    expires_at: _timestamp_pb2.Timestamp
    ttl: _duration_pb2.Duration
    checkpoint: bytes
    progress: Progress
    group_key: str
    unique_key: str
    unique_until: UniqueUntil
    debounce_key: str
    trace: TraceContext
    batch_id: str
    schedule: str
    scheduled_tick: _timestamp_pb2.Timestamp
    def __init__(self, jid: _Optional[str] = ..., type: _Optional[str] = ..., queue: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., attempt: _Optional[int] = ..., args: _Optional[_Union[_struct_pb2.ListValue, _Mapping]] = ..., kwargs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., payload: _Optional[bytes] = ..., custom: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., priority: _Optional[_Union[Priority, str]] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reserve_for: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., execution_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., backtrace: _Optional[int] = ..., tags: _Optional[_Mapping[str, str]] = ..., correlation_id: _Optional[str] = ..., fails: _Optional[int] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., enqueued_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., completed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., result: _Optional[bytes] = ..., previous_lease_ids: _Optional[_Iterable[str]] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., worker_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., parent_jid: _Optional[str] = ..., dependency_type: _Optional[_Union[DependencyType, str]] = ..., depends_on: _Optional[_Iterable[str]] = ..., waiting_on: _Optional[_Iterable[str]] = ..., children_of: _Optional[str] = ..., callback_url: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., checkpoint: _Optional[bytes] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., group_key: _Optional[str] = ..., unique_key: _Optional[str] = ..., unique_until: _Optional[_Union[UniqueUntil, str]] = ..., debounce_key: _Optional[str] = ..., trace: _Optional[_Union[TraceContext, _Mapping]] = ..., batch_id: _Optional[str] = ..., schedule: _Optional[str] = ..., scheduled_tick: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class TraceContext(_message.Message):
    __slots__ = ("traceparent", "tracestate")
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    traceparent: str
    tracestate: str
    def __init__(self, traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...
