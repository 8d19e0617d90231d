"""PyPI `faktory` 1.0 (Faktory's Python client, unchanged) against Worq's Faktory port.

Its producer pushes three `add` jobs, an `echo` job of non-ASCII text and one `flaky` job
to QUEUE; its worker (threads, concurrency 2) fetches them, together with any job already
waiting there, acks the ones that succeed and fails `flaky` the first time. It keeps working until `flaky` has come back
and succeeded (the test brings it back early through Worq's admin API), then beats until
the server says it is quiet, and disconnects. Prints one JSON line per event: pushed, ack,
fail, quiet, done.

Usage: FAKTORY_URL=tcp://:password@127.0.0.1:PORT QUEUE=name WID=id python pypi_faktory_client.py
"""

import json
import os
import sys
import threading
import time
from datetime import datetime
import uuid

import faktory
from faktory import Worker

QUEUE = os.environ["QUEUE"]
URL = os.environ["FAKTORY_URL"]
DEADLINE = time.monotonic() + float(os.environ.get("DEADLINE_S", "30"))
lock = threading.Lock()
flaky_calls = 0


def emit(event, **fields):
    with lock:
        print(json.dumps({"event": event, **fields}), flush=True)


def add(a, b):
    return a + b


TEXT = "h\u00e9llo \u2713 \u65e5\u672c \U0001f680"


def echo(text):
    # FETCH replies are UTF-8 with their length in bytes: this client reads them by that length.
    if text != TEXT:
        raise ValueError(f"got {text!r}")
    return text


def flaky(n):
    global flaky_calls
    with lock:
        flaky_calls += 1
        calls = flaky_calls
    if calls == 1:
        raise ValueError(f"flaky {n} failed once")
    return n


class RecordingWorker(Worker):
    """The library's worker, noting what it reports."""

    acked = set()
    failed = []

    def _ack(self, jid):
        super()._ack(jid)
        self.acked.add(jid)
        emit("ack", jid=jid)

    def _fail(self, jid, exception=None):
        super()._fail(jid, exception=exception)
        self.failed.append(jid)
        emit("fail", jid=jid, errtype=type(exception).__name__ if exception else None)


def main():
    jids = {"add": [uuid.uuid4().hex for _ in range(3)], "flaky": uuid.uuid4().hex, "echo": uuid.uuid4().hex}
    with faktory.connection(URL) as client:
        for i, jid in enumerate(jids["add"]):
            if not client.queue("add", args=(i, 10), queue=QUEUE, jid=jid):
                emit("push-refused", jid=jid)
                return 1
        if not client.queue("echo", args=(TEXT,), queue=QUEUE, jid=jids["echo"]):
            emit("push-refused", jid=jids["echo"])
            return 1
        if not client.queue("flaky", args=(7,), queue=QUEUE, jid=jids["flaky"], retry=3):
            emit("push-refused", jid=jids["flaky"])
            return 1
    emit("pushed", add=jids["add"], flaky=jids["flaky"], echo=jids["echo"])

    worker = RecordingWorker(faktory=URL, queues=[QUEUE], concurrency=2, use_threads=True, worker_id=os.environ["WID"])
    worker.send_heartbeat_every = 1
    worker.register("add", add)
    worker.register("flaky", flaky)
    worker.register("echo", echo)
    worker.faktory.connect(worker_id=worker.worker_id)
    # What Worker.run() does before its loop (run() itself never returns: it exits the process).
    worker._last_heartbeat = datetime.now()
    emit("worker", wid=worker.worker_id)
    want = set(jids["add"]) | {jids["flaky"], jids["echo"]}
    extra = int(os.environ.get("EXTRA_JOBS", "0"))
    while time.monotonic() < DEADLINE:
        worker.tick()
        if want <= worker.acked and len(worker.acked) >= len(want) + extra:
            break
    else:
        emit("timeout", acked=sorted(worker.acked))
        return 1
    while worker._pending:
        worker.tick()
    # Then it waits to be quieted: the server says so on a BEAT (the test quiets it through Worq's admin API).
    while not worker.is_quiet:
        if time.monotonic() > DEADLINE:
            emit("timeout", waiting="quiet")
            return 1
        worker.tick()
    emit("quiet")
    worker.faktory.disconnect()
    emit("done", acked=len(worker.acked), failed=worker.failed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
