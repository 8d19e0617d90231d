import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from worq.v1 import batch_pb2 as _batch_pb2
from worq.v1 import job_pb2 as _job_pb2
from worq.v1 import schedule_pb2 as _schedule_pb2
from worq.v1 import worker_service_pb2 as _worker_service_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PutScheduleRequest(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: _schedule_pb2.Schedule
    def __init__(self, schedule: _Optional[_Union[_schedule_pb2.Schedule, _Mapping]] = ...) -> None: ...

class PutScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: _schedule_pb2.Schedule
    def __init__(self, schedule: _Optional[_Union[_schedule_pb2.Schedule, _Mapping]] = ...) -> None: ...

class GetScheduleRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: _schedule_pb2.Schedule
    def __init__(self, schedule: _Optional[_Union[_schedule_pb2.Schedule, _Mapping]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ("schedules", "next_page_token")
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[_schedule_pb2.Schedule]
    next_page_token: str
    def __init__(self, schedules: _Optional[_Iterable[_Union[_schedule_pb2.Schedule, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class PauseScheduleResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResumeScheduleRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ResumeScheduleResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RunScheduleNowRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RunScheduleNowResponse(_message.Message):
    __slots__ = ("jid",)
    JID_FIELD_NUMBER: _ClassVar[int]
    jid: str
    def __init__(self, jid: _Optional[str] = ...) -> None: ...

class ListBatchesRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "state")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    state: _batch_pb2.BatchState
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., state: _Optional[_Union[_batch_pb2.BatchState, str]] = ...) -> None: ...

class ListBatchesResponse(_message.Message):
    __slots__ = ("batches", "next_page_token")
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    batches: _containers.RepeatedCompositeFieldContainer[_batch_pb2.Batch]
    next_page_token: str
    def __init__(self, batches: _Optional[_Iterable[_Union[_batch_pb2.Batch, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("jid",)
    JID_FIELD_NUMBER: _ClassVar[int]
    jid: str
    def __init__(self, jid: _Optional[str] = ...) -> None: ...

class GetJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("queue", "state", "page_size", "page_token", "type", "tags", "correlation_id", "jid_prefix", "created_after", "created_before", "parent_jid", "depends_on_jid")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    JID_PREFIX_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    PARENT_JID_FIELD_NUMBER: _ClassVar[int]
    DEPENDS_ON_JID_FIELD_NUMBER: _ClassVar[int]
    queue: str
    state: _job_pb2.JobState
    page_size: int
    page_token: str
    type: str
    tags: _containers.ScalarMap[str, str]
    correlation_id: str
    jid_prefix: str
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    parent_jid: str
    depends_on_jid: str
    def __init__(self, queue: _Optional[str] = ..., state: _Optional[_Union[_job_pb2.JobState, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., type: _Optional[str] = ..., tags: _Optional[_Mapping[str, str]] = ..., correlation_id: _Optional[str] = ..., jid_prefix: _Optional[str] = ..., created_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., parent_jid: _Optional[str] = ..., depends_on_jid: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListQueuesRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListQueuesResponse(_message.Message):
    __slots__ = ("queues", "next_page_token")
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueStats]
    next_page_token: str
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueStats, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class QueueStats(_message.Message):
    __slots__ = ("queue", "ready", "delayed", "in_flight", "retrying", "dead", "latency", "paused", "pending", "completed", "failed", "config", "rate_tokens", "groups", "top_groups")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    DELAYED_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    RETRYING_FIELD_NUMBER: _ClassVar[int]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    RATE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    TOP_GROUPS_FIELD_NUMBER: _ClassVar[int]
    queue: str
    ready: int
    delayed: int
    in_flight: int
    retrying: int
    dead: int
    latency: _duration_pb2.Duration
    paused: bool
    pending: int
    completed: int
    failed: int
    config: QueueConfig
    rate_tokens: int
    groups: int
    top_groups: _containers.RepeatedCompositeFieldContainer[GroupStats]
    def __init__(self, queue: _Optional[str] = ..., ready: _Optional[int] = ..., delayed: _Optional[int] = ..., in_flight: _Optional[int] = ..., retrying: _Optional[int] = ..., dead: _Optional[int] = ..., latency: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., paused: _Optional[bool] = ..., pending: _Optional[int] = ..., completed: _Optional[int] = ..., failed: _Optional[int] = ..., config: _Optional[_Union[QueueConfig, _Mapping]] = ..., rate_tokens: _Optional[int] = ..., groups: _Optional[int] = ..., top_groups: _Optional[_Iterable[_Union[GroupStats, _Mapping]]] = ...) -> None: ...

class QueueConfig(_message.Message):
    __slots__ = ("retry_timeout", "retry_system", "max_running", "rate_limit", "group_limits")
    RETRY_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    RETRY_SYSTEM_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    GROUP_LIMITS_FIELD_NUMBER: _ClassVar[int]
    retry_timeout: bool
    retry_system: bool
    max_running: int
    rate_limit: RateLimit
    group_limits: GroupLimits
    def __init__(self, retry_timeout: _Optional[bool] = ..., retry_system: _Optional[bool] = ..., max_running: _Optional[int] = ..., rate_limit: _Optional[_Union[RateLimit, _Mapping]] = ..., group_limits: _Optional[_Union[GroupLimits, _Mapping]] = ...) -> None: ...

class GroupLimits(_message.Message):
    __slots__ = ("limits",)
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.RepeatedCompositeFieldContainer[GroupLimit]
    def __init__(self, limits: _Optional[_Iterable[_Union[GroupLimit, _Mapping]]] = ...) -> None: ...

class GroupLimit(_message.Message):
    __slots__ = ("pattern", "max_running", "rate_limit")
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    pattern: str
    max_running: int
    rate_limit: RateLimit
    def __init__(self, pattern: _Optional[str] = ..., max_running: _Optional[int] = ..., rate_limit: _Optional[_Union[RateLimit, _Mapping]] = ...) -> None: ...

class GroupStats(_message.Message):
    __slots__ = ("group_key", "ready", "in_flight", "limit", "rate_tokens")
    GROUP_KEY_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    RATE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    group_key: str
    ready: int
    in_flight: int
    limit: GroupLimit
    rate_tokens: int
    def __init__(self, group_key: _Optional[str] = ..., ready: _Optional[int] = ..., in_flight: _Optional[int] = ..., limit: _Optional[_Union[GroupLimit, _Mapping]] = ..., rate_tokens: _Optional[int] = ...) -> None: ...

class RateLimit(_message.Message):
    __slots__ = ("starts", "period", "burst")
    STARTS_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    starts: int
    period: _duration_pb2.Duration
    burst: int
    def __init__(self, starts: _Optional[int] = ..., period: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., burst: _Optional[int] = ...) -> None: ...

class GetQueueStatsRequest(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class GetQueueStatsResponse(_message.Message):
    __slots__ = ("stats",)
    STATS_FIELD_NUMBER: _ClassVar[int]
    stats: QueueStats
    def __init__(self, stats: _Optional[_Union[QueueStats, _Mapping]] = ...) -> None: ...

class GetServerInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetServerInfoResponse(_message.Message):
    __slots__ = ("version", "started_at", "uptime", "connected_workers", "total_processed", "total_failed", "evicted_jobs", "live_jobs", "store", "total_submitted", "data_bytes", "connected_clients", "node_id", "cluster_nodes", "partition_count", "partitions", "spread_queues")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    UPTIME_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_WORKERS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_PROCESSED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FAILED_FIELD_NUMBER: _ClassVar[int]
    EVICTED_JOBS_FIELD_NUMBER: _ClassVar[int]
    LIVE_JOBS_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    DATA_BYTES_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_CLIENTS_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NODES_FIELD_NUMBER: _ClassVar[int]
    PARTITION_COUNT_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    SPREAD_QUEUES_FIELD_NUMBER: _ClassVar[int]
    version: str
    started_at: _timestamp_pb2.Timestamp
    uptime: _duration_pb2.Duration
    connected_workers: int
    total_processed: int
    total_failed: int
    evicted_jobs: int
    live_jobs: int
    store: str
    total_submitted: int
    data_bytes: int
    connected_clients: int
    node_id: str
    cluster_nodes: _containers.RepeatedCompositeFieldContainer[ClusterNode]
    partition_count: int
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionOwner]
    spread_queues: _containers.RepeatedCompositeFieldContainer[SpreadQueue]
    def __init__(self, version: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., uptime: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., connected_workers: _Optional[int] = ..., total_processed: _Optional[int] = ..., total_failed: _Optional[int] = ..., evicted_jobs: _Optional[int] = ..., live_jobs: _Optional[int] = ..., store: _Optional[str] = ..., total_submitted: _Optional[int] = ..., data_bytes: _Optional[int] = ..., connected_clients: _Optional[int] = ..., node_id: _Optional[str] = ..., cluster_nodes: _Optional[_Iterable[_Union[ClusterNode, _Mapping]]] = ..., partition_count: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[PartitionOwner, _Mapping]]] = ..., spread_queues: _Optional[_Iterable[_Union[SpreadQueue, _Mapping]]] = ...) -> None: ...

class SpreadQueue(_message.Message):
    __slots__ = ("queue", "partitions")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    queue: str
    partitions: int
    def __init__(self, queue: _Optional[str] = ..., partitions: _Optional[int] = ...) -> None: ...

class PartitionOwner(_message.Message):
    __slots__ = ("index", "node_id", "grpc_address", "epoch")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    index: int
    node_id: str
    grpc_address: str
    epoch: int
    def __init__(self, index: _Optional[int] = ..., node_id: _Optional[str] = ..., grpc_address: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class ClusterNode(_message.Message):
    __slots__ = ("node_id", "role", "grpc_address", "http_address", "started_at", "last_seen", "version")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    HTTP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    role: str
    grpc_address: str
    http_address: str
    started_at: _timestamp_pb2.Timestamp
    last_seen: _timestamp_pb2.Timestamp
    version: str
    def __init__(self, node_id: _Optional[str] = ..., role: _Optional[str] = ..., grpc_address: _Optional[str] = ..., http_address: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_seen: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., version: _Optional[str] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ("workers",)
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("worker_id", "queues", "credits", "held", "connected_at", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_AT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    queues: _containers.RepeatedScalarFieldContainer[str]
    credits: int
    held: _containers.RepeatedCompositeFieldContainer[_worker_service_pb2.LeaseRef]
    connected_at: _timestamp_pb2.Timestamp
    labels: _containers.ScalarMap[str, str]
    def __init__(self, worker_id: _Optional[str] = ..., queues: _Optional[_Iterable[str]] = ..., credits: _Optional[int] = ..., held: _Optional[_Iterable[_Union[_worker_service_pb2.LeaseRef, _Mapping]]] = ..., connected_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DeleteJobRequest(_message.Message):
    __slots__ = ("jid",)
    JID_FIELD_NUMBER: _ClassVar[int]
    jid: str
    def __init__(self, jid: _Optional[str] = ...) -> None: ...

class DeleteJobResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RetryJobsRequest(_message.Message):
    __slots__ = ("jids", "queue")
    JIDS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    jids: _containers.RepeatedScalarFieldContainer[str]
    queue: str
    def __init__(self, jids: _Optional[_Iterable[str]] = ..., queue: _Optional[str] = ...) -> None: ...

class RetryJobsResponse(_message.Message):
    __slots__ = ("retried",)
    RETRIED_FIELD_NUMBER: _ClassVar[int]
    retried: int
    def __init__(self, retried: _Optional[int] = ...) -> None: ...

class RunJobsNowRequest(_message.Message):
    __slots__ = ("jids",)
    JIDS_FIELD_NUMBER: _ClassVar[int]
    jids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, jids: _Optional[_Iterable[str]] = ...) -> None: ...

class RunJobsNowResponse(_message.Message):
    __slots__ = ("scheduled",)
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    scheduled: int
    def __init__(self, scheduled: _Optional[int] = ...) -> None: ...

class PauseQueueRequest(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class PauseQueueResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResumeQueueRequest(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class ResumeQueueResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PurgeQueueRequest(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class PurgeQueueResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    def __init__(self, deleted: _Optional[int] = ...) -> None: ...

class ControlWorkerRequest(_message.Message):
    __slots__ = ("worker_id", "action")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    action: _worker_service_pb2.ControlAction
    def __init__(self, worker_id: _Optional[str] = ..., action: _Optional[_Union[_worker_service_pb2.ControlAction, str]] = ...) -> None: ...

class ControlWorkerResponse(_message.Message):
    __slots__ = ("streams",)
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    streams: int
    def __init__(self, streams: _Optional[int] = ...) -> None: ...

class ConfigureQueueRequest(_message.Message):
    __slots__ = ("queue", "config")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    queue: str
    config: QueueConfig
    def __init__(self, queue: _Optional[str] = ..., config: _Optional[_Union[QueueConfig, _Mapping]] = ...) -> None: ...

class ConfigureQueueResponse(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: QueueConfig
    def __init__(self, config: _Optional[_Union[QueueConfig, _Mapping]] = ...) -> None: ...
