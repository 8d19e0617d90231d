"""The job model: :class:`Job` (as the server holds it), :class:`JobSpec` (what a producer
sets), :class:`RetryPolicy` and the enums. See proto/worq/v1/job.proto for every field."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import json
from functools import cached_property
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Type, TypeVar, Union

from worq.v1 import batch_pb2, job_pb2

from . import _convert, _tracing
from ._convert import Seconds

__all__ = [
    "JobState",
    "Priority",
    "FailureCategory",
    "Backoff",
    "OnExhausted",
    "RetryPolicy",
    "DependencyType",
    "Dependencies",
    "JobSpec",
    "Failure",
    "Job",
    "BatchState",
    "Batch",
]


class JobState(enum.IntEnum):
    """Where a job is in its lifecycle (docs/state-machine.md)."""

    UNSPECIFIED = 0
    PENDING = 1
    SCHEDULED = 2
    DELAYED = 3
    RUNNING = 4
    RETRYING = 5
    COMPLETED = 6
    FAILED = 7
    DEAD_LETTER = 8
    CANCELLED = 9

    @property
    def terminal(self) -> bool:
        """COMPLETED, FAILED, DEAD_LETTER or CANCELLED."""
        return self in (JobState.COMPLETED, JobState.FAILED, JobState.DEAD_LETTER, JobState.CANCELLED)


class Priority(enum.IntEnum):
    """Order inside a queue: strictly by level, FIFO within a level."""

    CRITICAL = 1
    HIGH = 2
    NORMAL = 3
    LOW = 4
    BULK = 5


class FailureCategory(enum.IntEnum):
    UNSPECIFIED = 0
    TEMPORARY = 1
    PERMANENT = 2
    TIMEOUT = 3
    CANCELLED = 4
    SYSTEM = 5


class Backoff(enum.IntEnum):
    CONSTANT = 1
    LINEAR = 2
    EXPONENTIAL = 3


class OnExhausted(enum.IntEnum):
    DEAD_LETTER = 1
    DISCARD = 2


class DependencyType(enum.IntEnum):
    """AFTER: run once every dependency COMPLETED (a failed one propagates); AFTER_ANY: once
    every dependency reached any terminal state."""

    AFTER = 1
    AFTER_ANY = 2


class UniqueUntil(enum.IntEnum):
    """How long a unique job's key stays held: WINDOW (for ``window`` from the first submit),
    STARTED (until the holder is first leased), FINISHED (until it ends)."""

    UNSPECIFIED = 0
    WINDOW = 1
    STARTED = 2
    FINISHED = 3


def _pb_enum(value: enum.IntEnum) -> Any:
    """The plain int a proto enum field takes (typed Any for the generated stubs' enum types)."""
    return int(value)


_E = TypeVar("_E", bound=enum.IntEnum)


def _enum_of(cls: Type[_E], value: object, where: str) -> _E:
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls[value.upper()]
        except KeyError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return cls(value)
        except ValueError:
            pass
    names = ", ".join(m.name.lower() for m in cls)
    raise ValueError(f"{where}: {value!r} is not one of {names}")


@dataclasses.dataclass
class RetryPolicy:
    """Retry bounds and pacing of a job. ``None`` fields take the server's defaults
    (3 attempts, exponential backoff from 1 s, doubling, capped at 1 h, then DEAD_LETTER)."""

    max_attempts: Optional[int] = None
    max_fails: Optional[int] = None
    backoff: Union[Backoff, str, None] = None
    initial_delay: Optional[Seconds] = None
    multiplier: Optional[float] = None
    max_delay: Optional[Seconds] = None
    jitter: bool = False
    on_exhausted: Union[OnExhausted, str, None] = None
    #: Whether a TIMEOUT failure (past the execution timeout) is retried; None: the queue's setting, else True.
    retry_timeout: Optional[bool] = None
    #: Whether a SYSTEM failure (a lapsed lease) is retried; None: the queue's setting, else True.
    retry_system: Optional[bool] = None

    @classmethod
    def coerce(cls, value: Union["RetryPolicy", Mapping[str, Any]], where: str = "retry") -> "RetryPolicy":
        if isinstance(value, RetryPolicy):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - {f.name for f in dataclasses.fields(cls)}
            if unknown:
                raise TypeError(f"{where}: unknown keys {sorted(unknown)}")
            return cls(**value)
        raise TypeError(f"{where}: must be a RetryPolicy or a dict, got {type(value).__name__}")

    def to_proto(self, where: str = "retry") -> job_pb2.RetryPolicy:
        out = job_pb2.RetryPolicy()
        if self.max_attempts is not None:
            out.max_attempts = self.max_attempts
        if self.max_fails is not None:
            out.max_fails = self.max_fails
        if self.backoff is not None:
            out.backoff = _pb_enum(_enum_of(Backoff, self.backoff, f"{where}.backoff"))
        if self.initial_delay is not None:
            out.initial_delay.CopyFrom(_convert.to_duration(self.initial_delay, f"{where}.initial_delay"))
        if self.multiplier is not None:
            out.multiplier = self.multiplier
        if self.max_delay is not None:
            out.max_delay.CopyFrom(_convert.to_duration(self.max_delay, f"{where}.max_delay"))
        out.jitter = bool(self.jitter)
        if self.on_exhausted is not None:
            out.on_exhausted = _pb_enum(_enum_of(OnExhausted, self.on_exhausted, f"{where}.on_exhausted"))
        if self.retry_timeout is not None:
            out.retry_timeout = bool(self.retry_timeout)
        if self.retry_system is not None:
            out.retry_system = bool(self.retry_system)
        return out

    @classmethod
    def from_proto(cls, proto: job_pb2.RetryPolicy) -> "RetryPolicy":
        return cls(
            max_attempts=proto.max_attempts if proto.HasField("max_attempts") else None,
            max_fails=proto.max_fails if proto.HasField("max_fails") else None,
            backoff=Backoff(proto.backoff) if proto.backoff else None,
            initial_delay=_convert.from_duration(proto.initial_delay) if proto.HasField("initial_delay") else None,
            multiplier=proto.multiplier if proto.HasField("multiplier") else None,
            max_delay=_convert.from_duration(proto.max_delay) if proto.HasField("max_delay") else None,
            jitter=proto.jitter,
            on_exhausted=OnExhausted(proto.on_exhausted) if proto.on_exhausted else None,
            retry_timeout=proto.retry_timeout if proto.HasField("retry_timeout") else None,
            retry_system=proto.retry_system if proto.HasField("retry_system") else None,
        )


@dataclasses.dataclass
class Dependencies:
    """Jobs a job waits for (in PENDING): existing ``jids``, and jobs of the same
    ``submit_batch`` named by their ``batch_ref``. ``children_of``: a job whose children
    (jobs submitted with it as ``parent_jid``) this one waits for, with it, those spawned
    later included (FAN_IN over spawned jobs)."""

    jids: Sequence[str] = ()
    batch_refs: Sequence[str] = ()
    type: Union[DependencyType, str, None] = None
    children_of: Optional[str] = None

    @classmethod
    def coerce(cls, value: Union["Dependencies", Mapping[str, Any], Sequence[str]], where: str = "depends_on") -> "Dependencies":
        """A :class:`Dependencies`, a dict of its fields, or a plain list of jids."""
        if isinstance(value, Dependencies):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - {f.name for f in dataclasses.fields(cls)}
            if unknown:
                raise TypeError(f"{where}: unknown keys {sorted(unknown)}")
            return cls(**value)
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            return cls(jids=list(value))
        raise TypeError(f"{where}: must be Dependencies, a dict or a list of jids, got {type(value).__name__}")

    def to_proto(self, where: str = "depends_on") -> job_pb2.Dependencies:
        out = job_pb2.Dependencies(jids=list(self.jids), batch_refs=list(self.batch_refs), children_of=self.children_of or "")
        if self.type is not None:
            out.type = _pb_enum(_enum_of(DependencyType, self.type, f"{where}.type"))
        return out


@dataclasses.dataclass
class JobSpec:
    """Everything a producer sets on a job; the keyword arguments of :meth:`worq.Client.submit`."""

    type: str
    args: Optional[Sequence[Any]] = None
    kwargs: Optional[Mapping[str, Any]] = None
    payload: Union[bytes, str, None] = None
    queue: str = "default"
    priority: Union[Priority, str, int, None] = None
    at: Optional[_dt.datetime] = None
    delay: Optional[Seconds] = None
    retry: Union[RetryPolicy, Mapping[str, Any], None] = None
    custom: Optional[Mapping[str, Any]] = None
    reserve_for: Optional[Seconds] = None
    execution_timeout: Optional[Seconds] = None
    backtrace: Optional[int] = None
    tags: Optional[Mapping[str, str]] = None
    correlation_id: Optional[str] = None
    ttl: Optional[Seconds] = None
    idempotency_key: Optional[str] = None
    depends_on: Union[Dependencies, Mapping[str, Any], Sequence[str], None] = None
    batch_ref: Optional[str] = None
    parent_jid: Optional[str] = None
    callback_url: Optional[str] = None
    #: The job's group within its queue (e.g. ``"customer:42"``): the queue's group limits apply
    #: to each group alone, and groups with ready jobs take turns.
    group: Optional[str] = None
    #: Uniqueness in the job's queue: a dict with ``key`` (empty or absent: derived by the server
    #: from type, queue, args, kwargs and payload), ``until`` (a :class:`UniqueUntil` or its name)
    #: and ``window`` (seconds or timedelta; only for until WINDOW).
    unique: Optional[Mapping[str, Any]] = None
    #: Debounce in the job's queue: a dict with ``key`` and ``delay`` (seconds or timedelta), both required.
    debounce: Optional[Mapping[str, Any]] = None
    #: W3C trace context to carry: a dict with ``traceparent`` (and optionally ``tracestate``);
    #: None (default): the active OpenTelemetry span's, when opentelemetry-api is installed and a
    #: span is active; False: none (docs/tracing.md).
    trace: Union[Mapping[str, str], bool, None] = None
    #: The batch (:meth:`Client.create_batch`) the job joins.
    batch_id: Optional[str] = None

    @classmethod
    def coerce(cls, value: Union["JobSpec", Mapping[str, Any]], where: str = "job") -> "JobSpec":
        if isinstance(value, JobSpec):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - {f.name for f in dataclasses.fields(cls)}
            if unknown:
                raise TypeError(f"{where}: unknown keys {sorted(unknown)}")
            if "type" not in value:
                raise TypeError(f"{where}: 'type' is required")
            return cls(**value)
        raise TypeError(f"{where}: must be a JobSpec or a dict, got {type(value).__name__}")

    def to_proto(self, where: str = "job") -> job_pb2.JobSpec:
        if not isinstance(self.type, str):
            raise TypeError(f"{where}.type: must be a str")
        out = job_pb2.JobSpec(type=self.type, queue=self.queue or "")
        if self.args is not None:
            out.args.CopyFrom(_convert.to_list(self.args, f"{where}.args"))
        if self.kwargs is not None:
            out.kwargs.CopyFrom(_convert.to_struct(self.kwargs, f"{where}.kwargs"))
        if self.payload is not None:
            if isinstance(self.payload, str):
                out.payload = self.payload.encode("utf-8")
            elif isinstance(self.payload, (bytes, bytearray, memoryview)):
                out.payload = bytes(self.payload)
            else:
                raise TypeError(f"{where}.payload: must be bytes or str")
        if self.custom is not None:
            out.custom.CopyFrom(_convert.to_struct(self.custom, f"{where}.custom"))
        if self.priority is not None:
            out.priority = _pb_enum(_enum_of(Priority, self.priority, f"{where}.priority"))
        if self.at is not None and self.delay is not None:
            raise ValueError(f"{where}: give at or delay, not both")
        if self.at is not None:
            out.at.CopyFrom(_convert.to_timestamp(self.at, f"{where}.at"))
        if self.delay is not None:
            out.delay.CopyFrom(_convert.to_duration(self.delay, f"{where}.delay"))
        if self.retry is not None:
            out.retry.CopyFrom(RetryPolicy.coerce(self.retry, f"{where}.retry").to_proto(f"{where}.retry"))
        if self.reserve_for is not None:
            out.reserve_for.CopyFrom(_convert.to_duration(self.reserve_for, f"{where}.reserve_for"))
        if self.execution_timeout is not None:
            out.execution_timeout.CopyFrom(_convert.to_duration(self.execution_timeout, f"{where}.execution_timeout"))
        if self.backtrace is not None:
            out.backtrace = self.backtrace
        if self.tags:
            for key, value in self.tags.items():
                out.tags[key] = value
        if self.correlation_id is not None:
            out.correlation_id = self.correlation_id
        if self.group is not None:
            out.group_key = self.group
        if self.batch_id is not None:
            out.batch_id = self.batch_id
        if self.ttl is not None:
            out.ttl.CopyFrom(_convert.to_duration(self.ttl, f"{where}.ttl"))
        if self.idempotency_key is not None:
            out.idempotency_key = self.idempotency_key
        if self.depends_on is not None:
            out.depends_on.CopyFrom(Dependencies.coerce(self.depends_on, f"{where}.depends_on").to_proto(f"{where}.depends_on"))
        if self.batch_ref is not None:
            out.batch_ref = self.batch_ref
        if self.parent_jid is not None:
            out.parent_jid = self.parent_jid
        if self.callback_url is not None:
            out.callback_url = self.callback_url
        if self.unique is not None:
            _check_keys(self.unique, {"key", "until", "window"}, f"{where}.unique")
            out.unique.SetInParent()
            out.unique.key = self.unique.get("key") or ""
            if self.unique.get("until") is not None:
                out.unique.until = _pb_enum(_enum_of(UniqueUntil, self.unique["until"], f"{where}.unique.until"))
            if self.unique.get("window") is not None:
                out.unique.window.CopyFrom(_convert.to_duration(self.unique["window"], f"{where}.unique.window"))
        if self.debounce is not None:
            _check_keys(self.debounce, {"key", "delay"}, f"{where}.debounce")
            out.debounce.SetInParent()
            out.debounce.key = self.debounce.get("key") or ""
            if self.debounce.get("delay") is not None:
                out.debounce.delay.CopyFrom(_convert.to_duration(self.debounce["delay"], f"{where}.debounce.delay"))
        if self.trace is None:
            active = _tracing.active_trace()
            if active is not None:
                out.trace.traceparent, out.trace.tracestate = active
        elif self.trace is not False:
            if self.trace is True or not isinstance(self.trace, Mapping):
                raise TypeError(f"{where}.trace: must be a dict with traceparent (and tracestate), None or False")
            _check_keys(self.trace, {"traceparent", "tracestate"}, f"{where}.trace")
            out.trace.traceparent = self.trace.get("traceparent") or ""
            out.trace.tracestate = self.trace.get("tracestate") or ""
        return out


def _check_keys(value: Mapping[str, Any], known: Set[str], where: str) -> None:
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}: must be a dict")
    unknown = set(value) - known
    if unknown:
        raise TypeError(f"{where}: unknown keys {sorted(unknown)}")


@dataclasses.dataclass(frozen=True)
class SubmitResult:
    """What the server made of one submit: the job's jid (an earlier job's when ``duplicate``,
    a waiting job's when ``debounced``) and its state."""

    jid: str
    duplicate: bool
    debounced: bool
    state: "JobState"


@dataclasses.dataclass(frozen=True)
class Failure:
    """The record of a job's last failure."""

    message: str
    errtype: str
    backtrace: List[str]
    category: FailureCategory
    retry_count: int
    failed_at: Optional[_dt.datetime]
    retried_at: Optional[_dt.datetime]
    #: The application error code (a PermanentError's ``code``); "" when none.
    code: str = ""
    #: What caused the failure (the wrapped exception's text); "" when none.
    cause: str = ""


@dataclasses.dataclass(frozen=True)
class Progress:
    """A running job's last progress report: ``percent`` 0 to 100 and a ``message``."""

    percent: int
    message: str
    updated_at: Optional[_dt.datetime]


class Job:
    """A job as the server holds it. Wraps the ``worq.v1.Job`` proto (``job.raw``) and decodes
    its fields to Python values: ``args`` a list, ``kwargs``/``custom`` dicts (JSON numbers that
    are whole come back as ``int``), ``payload``/``result`` bytes, times as aware UTC datetimes."""

    def __init__(self, raw: job_pb2.Job) -> None:
        self.raw: job_pb2.Job = raw

    def __repr__(self) -> str:
        return f"<worq.Job {self.jid} type={self.type!r} queue={self.queue!r} state={self.state.name} attempt={self.attempt}>"

    @property
    def jid(self) -> str:
        return self.raw.jid

    @property
    def type(self) -> str:
        return self.raw.type

    @property
    def queue(self) -> str:
        return self.raw.queue

    @property
    def state(self) -> JobState:
        return JobState(self.raw.state)

    @property
    def attempt(self) -> int:
        """1 on the first execution, 2 on the first retry, …"""
        return self.raw.attempt

    @cached_property
    def args(self) -> List[Any]:
        return _convert.from_list(self.raw.args)

    @cached_property
    def kwargs(self) -> Dict[str, Any]:
        return _convert.from_struct(self.raw.kwargs)

    @property
    def payload(self) -> bytes:
        return self.raw.payload

    @cached_property
    def custom(self) -> Dict[str, Any]:
        return _convert.from_struct(self.raw.custom)

    @property
    def tags(self) -> Dict[str, str]:
        return dict(self.raw.tags)

    @property
    def priority(self) -> Priority:
        return Priority(self.raw.priority) if self.raw.priority else Priority.NORMAL

    @property
    def correlation_id(self) -> str:
        return self.raw.correlation_id

    @property
    def group(self) -> str:
        """The job's group within its queue (empty: the default group)."""
        return self.raw.group_key

    @property
    def backtrace(self) -> int:
        """How many stack frames of a failure to keep."""
        return self.raw.backtrace

    @property
    def reserve_for(self) -> _dt.timedelta:
        return _convert.from_duration(self.raw.reserve_for)

    @property
    def execution_timeout(self) -> _dt.timedelta:
        return _convert.from_duration(self.raw.execution_timeout)

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy.from_proto(self.raw.retry)

    @property
    def fails(self) -> int:
        return self.raw.fails

    @property
    def worker_id(self) -> str:
        return self.raw.worker_id

    @property
    def idempotency_key(self) -> str:
        return self.raw.idempotency_key

    @property
    def unique_key(self) -> str:
        """The unique key the job took (derived when the submit left it empty); "" when not unique."""
        return self.raw.unique_key

    @property
    def unique_until(self) -> UniqueUntil:
        return UniqueUntil(self.raw.unique_until)

    @property
    def debounce_key(self) -> str:
        return self.raw.debounce_key

    @property
    def traceparent(self) -> str:
        """The producer's W3C traceparent (JobSpec trace); "" when the job carries none."""
        return self.raw.trace.traceparent

    @property
    def tracestate(self) -> str:
        return self.raw.trace.tracestate

    @property
    def batch_id(self) -> str:
        """The batch the job belongs to (empty: none)."""
        return self.raw.batch_id

    @property
    def parent_jid(self) -> str:
        return self.raw.parent_jid

    @property
    def depends_on(self) -> List[str]:
        return list(self.raw.depends_on)

    @property
    def waiting_on(self) -> List[str]:
        """While PENDING: the dependencies not finished yet."""
        return list(self.raw.waiting_on)

    @property
    def ttl(self) -> _dt.timedelta:
        return _convert.from_duration(self.raw.ttl)

    @property
    def expires_at(self) -> Optional[_dt.datetime]:
        return _convert.optional_timestamp(self.raw, "expires_at")

    @property
    def result(self) -> bytes:
        """What the handler returned (bytes as-is, str as UTF-8, else JSON); set once COMPLETED."""
        return self.raw.result

    @property
    def checkpoint(self) -> bytes:
        """The last checkpoint a handler saved (``ctx.checkpoint``); empty when none. A retry
        gets the one its earlier attempt saved: resume from there."""
        return self.raw.checkpoint

    @property
    def progress(self) -> Optional["Progress"]:
        """What the handler of the current or last attempt last reported (``ctx.progress``)."""
        if not self.raw.HasField("progress"):
            return None
        p = self.raw.progress
        return Progress(percent=p.percent, message=p.message, updated_at=_convert.optional_timestamp(p, "updated_at"))

    @property
    def result_text(self) -> str:
        return self.raw.result.decode("utf-8")

    def result_json(self) -> Any:
        """The result parsed as JSON (for handlers that returned dicts, lists, numbers…)."""
        return json.loads(self.raw.result)

    @property
    def failure(self) -> Optional[Failure]:
        if not self.raw.HasField("failure"):
            return None
        f = self.raw.failure
        return Failure(
            message=f.message,
            errtype=f.errtype,
            backtrace=list(f.backtrace),
            category=FailureCategory(f.category),
            retry_count=f.retry_count,
            failed_at=_convert.optional_timestamp(f, "failed_at"),
            retried_at=_convert.optional_timestamp(f, "retried_at"),
            code=f.code,
            cause=f.cause,
        )

    @property
    def created_at(self) -> Optional[_dt.datetime]:
        return _convert.optional_timestamp(self.raw, "created_at")

    @property
    def started_at(self) -> Optional[_dt.datetime]:
        return _convert.optional_timestamp(self.raw, "started_at")

    @property
    def completed_at(self) -> Optional[_dt.datetime]:
        return _convert.optional_timestamp(self.raw, "completed_at")

    @property
    def scheduled_at(self) -> Optional[_dt.datetime]:
        return _convert.optional_timestamp(self.raw, "scheduled_at")

    @property
    def lease_expires_at(self) -> Optional[_dt.datetime]:
        return _convert.optional_timestamp(self.raw, "lease_expires_at")


class BatchState(enum.IntEnum):
    """Where a batch is: OPEN takes jobs from anyone; SEALED only from its own running jobs;
    SUCCEEDED and FINISHED_WITH_FAILURES are done (its callbacks ran)."""

    UNSPECIFIED = 0
    OPEN = 1
    SEALED = 2
    SUCCEEDED = 3
    FINISHED_WITH_FAILURES = 4


class Batch:
    """A batch of jobs with its counts. Wraps the ``worq.v1.Batch`` proto (``batch.raw``)."""

    def __init__(self, raw: batch_pb2.Batch) -> None:
        self.raw: batch_pb2.Batch = raw

    def __repr__(self) -> str:
        return f"<worq.Batch {self.id} state={self.state.name} total={self.total} pending={self.pending}>"

    @property
    def id(self) -> str:
        return self.raw.id

    @property
    def description(self) -> str:
        return self.raw.description

    @property
    def parent_batch_id(self) -> str:
        return self.raw.parent_batch_id

    @property
    def state(self) -> BatchState:
        return BatchState(self.raw.state)

    @property
    def done(self) -> bool:
        """Whether every job and child batch finished (and the callbacks ran)."""
        return self.state in (BatchState.SUCCEEDED, BatchState.FINISHED_WITH_FAILURES)

    @property
    def total(self) -> int:
        return self.raw.total

    @property
    def pending(self) -> int:
        return self.raw.pending

    @property
    def completed(self) -> int:
        return self.raw.completed

    @property
    def failed(self) -> int:
        """Jobs that ended FAILED, DEAD_LETTER or CANCELLED."""
        return self.raw.failed

    @property
    def child_batches(self) -> int:
        return self.raw.child_batches

    @property
    def pending_child_batches(self) -> int:
        return self.raw.pending_child_batches

    @property
    def on_success_jid(self) -> str:
        """The on_success callback job, once enqueued (empty before, and when it never runs)."""
        return self.raw.on_success_jid

    @property
    def on_complete_jid(self) -> str:
        return self.raw.on_complete_jid

    @property
    def created_at(self) -> Optional[_dt.datetime]:
        return _convert.optional_timestamp(self.raw, "created_at")

    @property
    def finished_at(self) -> Optional[_dt.datetime]:
        return _convert.optional_timestamp(self.raw, "finished_at")
