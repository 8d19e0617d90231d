__path__ = __import__("pkgutil").extend_path(__path__, __name__)
__doc__ = """Worq: a Python client and worker library for the Worq job server.

::

    import worq

    async with worq.Client("127.0.0.1:7419") as client:
        jid = await client.submit("email.send", args=["a@example.com"], queue="mail")

    worker = worq.Worker("127.0.0.1:7419", queues=["mail"])

    @worker.handler("email.send")
    async def send(job, ctx):
        ...

The generated protobuf stubs live in the ``worq.v1`` subpackage (the ``worq-proto``
distribution); ``worq`` is a pkgutil-style namespace package shared by both.
"""

from . import errors
from .client import Client
from .errors import (
    DeadlineExceeded,
    InvalidArgument,
    LeaseLost,
    NotFound,
    PermanentError,
    PermissionDenied,
    RateLimited,
    ResourceExhausted,
    RetryLater,
    TemporaryError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    WorqError,
)
from ._channel import TLS
from .types import (
    Backoff,
    Batch,
    BatchState,
    Dependencies,
    DependencyType,
    Failure,
    FailureCategory,
    Job,
    JobSpec,
    JobState,
    OnExhausted,
    Priority,
    Progress,
    RetryPolicy,
    SubmitResult,
    UniqueUntil,
)
from .worker import JobContext, Worker, WorkerEvent

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Worker",
    "JobContext",
    "WorkerEvent",
    "Job",
    "JobSpec",
    "JobState",
    "Priority",
    "RetryPolicy",
    "Dependencies",
    "DependencyType",
    "SubmitResult",
    "Batch",
    "BatchState",
    "UniqueUntil",
    "Backoff",
    "OnExhausted",
    "Failure",
    "Progress",
    "FailureCategory",
    "PermanentError",
    "TemporaryError",
    "RetryLater",
    "RateLimited",
    "WorqError",
    "InvalidArgument",
    "NotFound",
    "Unauthenticated",
    "PermissionDenied",
    "TLS",
    "LeaseLost",
    "Unavailable",
    "DeadlineExceeded",
    "ResourceExhausted",
    "Unimplemented",
    "errors",
]

import logging as _logging

_logging.getLogger("worq").addHandler(_logging.NullHandler())
