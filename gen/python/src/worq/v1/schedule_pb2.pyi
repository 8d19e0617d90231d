import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from worq.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MissedTicks(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MISSED_TICKS_UNSPECIFIED: _ClassVar[MissedTicks]
    MISSED_TICKS_SKIP: _ClassVar[MissedTicks]
    MISSED_TICKS_CATCH_UP: _ClassVar[MissedTicks]

class Overlap(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OVERLAP_UNSPECIFIED: _ClassVar[Overlap]
    OVERLAP_ALLOW: _ClassVar[Overlap]
    OVERLAP_SKIP: _ClassVar[Overlap]
    OVERLAP_QUEUE_ONE: _ClassVar[Overlap]
MISSED_TICKS_UNSPECIFIED: MissedTicks
MISSED_TICKS_SKIP: MissedTicks
MISSED_TICKS_CATCH_UP: MissedTicks
OVERLAP_UNSPECIFIED: Overlap
OVERLAP_ALLOW: Overlap
OVERLAP_SKIP: Overlap
OVERLAP_QUEUE_ONE: Overlap

class Schedule(_message.Message):
    __slots__ = ("name", "cron", "time_zone", "job", "missed", "catch_up_max", "overlap", "paused", "description", "next_runs", "last_run_at", "last_jid", "last_state", "skipped_ticks", "source")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_MAX_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUNS_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_JID_FIELD_NUMBER: _ClassVar[int]
    LAST_STATE_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_TICKS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    name: str
    cron: str
    time_zone: str
    job: _job_pb2.JobSpec
    missed: MissedTicks
    catch_up_max: int
    overlap: Overlap
    paused: bool
    description: str
    next_runs: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    last_run_at: _timestamp_pb2.Timestamp
    last_jid: str
    last_state: _job_pb2.JobState
    skipped_ticks: int
    source: str
    def __init__(self, name: _Optional[str] = ..., cron: _Optional[str] = ..., time_zone: _Optional[str] = ..., job: _Optional[_Union[_job_pb2.JobSpec, _Mapping]] = ..., missed: _Optional[_Union[MissedTicks, str]] = ..., catch_up_max: _Optional[int] = ..., overlap: _Optional[_Union[Overlap, str]] = ..., paused: _Optional[bool] = ..., description: _Optional[str] = ..., next_runs: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ..., last_run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_jid: _Optional[str] = ..., last_state: _Optional[_Union[_job_pb2.JobState, str]] = ..., skipped_ticks: _Optional[int] = ..., source: _Optional[str] = ...) -> None: ...
