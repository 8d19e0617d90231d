import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from worq.v1 import batch_pb2 as _batch_pb2
from worq.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BatchShape(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BATCH_SHAPE_UNSPECIFIED: _ClassVar[BatchShape]
    BATCH_SHAPE_CHAIN: _ClassVar[BatchShape]
    BATCH_SHAPE_FAN_IN: _ClassVar[BatchShape]
BATCH_SHAPE_UNSPECIFIED: BatchShape
BATCH_SHAPE_CHAIN: BatchShape
BATCH_SHAPE_FAN_IN: BatchShape

class SubmitRequest(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.JobSpec
    def __init__(self, job: _Optional[_Union[_job_pb2.JobSpec, _Mapping]] = ...) -> None: ...

class SubmitResponse(_message.Message):
    __slots__ = ("jid", "duplicate", "state", "debounced")
    JID_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DEBOUNCED_FIELD_NUMBER: _ClassVar[int]
    jid: str
    duplicate: bool
    state: _job_pb2.JobState
    debounced: bool
    def __init__(self, jid: _Optional[str] = ..., duplicate: _Optional[bool] = ..., state: _Optional[_Union[_job_pb2.JobState, str]] = ..., debounced: _Optional[bool] = ...) -> None: ...

class SubmitBatchRequest(_message.Message):
    __slots__ = ("jobs", "shape")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.JobSpec]
    shape: BatchShape
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.JobSpec, _Mapping]]] = ..., shape: _Optional[_Union[BatchShape, str]] = ...) -> None: ...

class SubmitBatchResponse(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[SubmitResponse]
    def __init__(self, jobs: _Optional[_Iterable[_Union[SubmitResponse, _Mapping]]] = ...) -> None: ...

class RunRequest(_message.Message):
    __slots__ = ("job", "wait_timeout")
    JOB_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.JobSpec
    wait_timeout: _duration_pb2.Duration
    def __init__(self, job: _Optional[_Union[_job_pb2.JobSpec, _Mapping]] = ..., wait_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RunResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class GetResultRequest(_message.Message):
    __slots__ = ("jid", "wait_timeout")
    JID_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    jid: str
    wait_timeout: _duration_pb2.Duration
    def __init__(self, jid: _Optional[str] = ..., wait_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class GetResultResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("jid",)
    JID_FIELD_NUMBER: _ClassVar[int]
    jid: str
    def __init__(self, jid: _Optional[str] = ...) -> None: ...

class CancelResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class WatchJobRequest(_message.Message):
    __slots__ = ("jid",)
    JID_FIELD_NUMBER: _ClassVar[int]
    jid: str
    def __init__(self, jid: _Optional[str] = ...) -> None: ...

class WatchJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class CollectChildrenRequest(_message.Message):
    __slots__ = ("parent_jid", "wait_timeout", "page_size", "page_token")
    PARENT_JID_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    parent_jid: str
    wait_timeout: _duration_pb2.Duration
    page_size: int
    page_token: str
    def __init__(self, parent_jid: _Optional[str] = ..., wait_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class CollectChildrenResponse(_message.Message):
    __slots__ = ("children", "finished", "next_page_token")
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    children: _containers.RepeatedCompositeFieldContainer[_job_pb2.Job]
    finished: bool
    next_page_token: str
    def __init__(self, children: _Optional[_Iterable[_Union[_job_pb2.Job, _Mapping]]] = ..., finished: _Optional[bool] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CreateBatchRequest(_message.Message):
    __slots__ = ("batch",)
    BATCH_FIELD_NUMBER: _ClassVar[int]
    batch: _batch_pb2.BatchSpec
    def __init__(self, batch: _Optional[_Union[_batch_pb2.BatchSpec, _Mapping]] = ...) -> None: ...

class CreateBatchResponse(_message.Message):
    __slots__ = ("batch",)
    BATCH_FIELD_NUMBER: _ClassVar[int]
    batch: _batch_pb2.Batch
    def __init__(self, batch: _Optional[_Union[_batch_pb2.Batch, _Mapping]] = ...) -> None: ...

class SealBatchRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class SealBatchResponse(_message.Message):
    __slots__ = ("batch",)
    BATCH_FIELD_NUMBER: _ClassVar[int]
    batch: _batch_pb2.Batch
    def __init__(self, batch: _Optional[_Union[_batch_pb2.Batch, _Mapping]] = ...) -> None: ...

class GetBatchRequest(_message.Message):
    __slots__ = ("id", "wait")
    ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    id: str
    wait: _duration_pb2.Duration
    def __init__(self, id: _Optional[str] = ..., wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class GetBatchResponse(_message.Message):
    __slots__ = ("batch",)
    BATCH_FIELD_NUMBER: _ClassVar[int]
    batch: _batch_pb2.Batch
    def __init__(self, batch: _Optional[_Union[_batch_pb2.Batch, _Mapping]] = ...) -> None: ...
