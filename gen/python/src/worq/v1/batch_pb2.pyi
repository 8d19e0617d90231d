import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from worq.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BatchState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BATCH_STATE_UNSPECIFIED: _ClassVar[BatchState]
    BATCH_STATE_OPEN: _ClassVar[BatchState]
    BATCH_STATE_SEALED: _ClassVar[BatchState]
    BATCH_STATE_SUCCEEDED: _ClassVar[BatchState]
    BATCH_STATE_FINISHED_WITH_FAILURES: _ClassVar[BatchState]
BATCH_STATE_UNSPECIFIED: BatchState
BATCH_STATE_OPEN: BatchState
BATCH_STATE_SEALED: BatchState
BATCH_STATE_SUCCEEDED: BatchState
BATCH_STATE_FINISHED_WITH_FAILURES: BatchState

class BatchCallback(_message.Message):
    __slots__ = ("job", "webhook_url")
    JOB_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_URL_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.JobSpec
    webhook_url: str
    def __init__(self, job: _Optional[_Union[_job_pb2.JobSpec, _Mapping]] = ..., webhook_url: _Optional[str] = ...) -> None: ...

class BatchSpec(_message.Message):
    __slots__ = ("description", "parent_batch_id", "on_success", "on_complete")
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARENT_BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    ON_SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ON_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    description: str
    parent_batch_id: str
    on_success: BatchCallback
    on_complete: BatchCallback
    def __init__(self, description: _Optional[str] = ..., parent_batch_id: _Optional[str] = ..., on_success: _Optional[_Union[BatchCallback, _Mapping]] = ..., on_complete: _Optional[_Union[BatchCallback, _Mapping]] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ("id", "description", "parent_batch_id", "state", "on_success", "on_complete", "total", "pending", "completed", "failed", "child_batches", "pending_child_batches", "created_at", "sealed_at", "finished_at", "on_success_jid", "on_complete_jid")
    ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARENT_BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ON_SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ON_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    CHILD_BATCHES_FIELD_NUMBER: _ClassVar[int]
    PENDING_CHILD_BATCHES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    SEALED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    ON_SUCCESS_JID_FIELD_NUMBER: _ClassVar[int]
    ON_COMPLETE_JID_FIELD_NUMBER: _ClassVar[int]
    id: str
    description: str
    parent_batch_id: str
    state: BatchState
    on_success: BatchCallback
    on_complete: BatchCallback
    total: int
    pending: int
    completed: int
    failed: int
    child_batches: int
    pending_child_batches: int
    created_at: _timestamp_pb2.Timestamp
    sealed_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    on_success_jid: str
    on_complete_jid: str
    def __init__(self, id: _Optional[str] = ..., description: _Optional[str] = ..., parent_batch_id: _Optional[str] = ..., state: _Optional[_Union[BatchState, str]] = ..., on_success: _Optional[_Union[BatchCallback, _Mapping]] = ..., on_complete: _Optional[_Union[BatchCallback, _Mapping]] = ..., total: _Optional[int] = ..., pending: _Optional[int] = ..., completed: _Optional[int] = ..., failed: _Optional[int] = ..., child_batches: _Optional[int] = ..., pending_child_batches: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., sealed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., on_success_jid: _Optional[str] = ..., on_complete_jid: _Optional[str] = ...) -> None: ...
