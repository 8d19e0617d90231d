"""PyPI `pyfaktory` 0.2 (a Faktory client in Python, unchanged) against Worq's Faktory port.

Its producer pushes one `add` job (PUSH) and three more plus one `flaky` job in one PUSHB to
QUEUE, with an `echo` job of non-ASCII text; its consumer (a process pool, concurrency 2, beating every second as worker WID)
runs them, with any job already waiting there: `flaky` fails the first time. The consumer
runs until the server tells it to terminate on a BEAT (the test does so through Worq's
admin API once every job is done). Prints one JSON line per event: pushed, ack, fail, stopped.

Usage: FAKTORY_URL=tcp://:password@127.0.0.1:PORT QUEUE=name WID=id MARKER=/tmp/file python pyfaktory_client.py
"""

import json
import os
import sys
import uuid

from pyfaktory import Client, Consumer, Job, Producer

QUEUE = os.environ["QUEUE"]
URL = os.environ["FAKTORY_URL"]
MARKER = os.environ["MARKER"]


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def add(a, b):
    return a + b


TEXT = "h\u00e9llo \u2713 \u65e5\u672c \U0001f680"


def echo(text):
    if text != TEXT:
        raise ValueError(f"got {text!r}")
    return text


def flaky(n):
    # Handlers run in other processes: the first call leaves a file behind.
    if not os.path.exists(MARKER):
        open(MARKER, "w").close()
        raise ValueError(f"flaky {n} failed once")
    return n


def main():
    add_jids = [uuid.uuid4().hex for _ in range(4)]
    flaky_jid = uuid.uuid4().hex
    echo_jid = uuid.uuid4().hex
    with Client(faktory_url=URL, role="producer") as client:
        producer = Producer(client=client)
        producer.push(Job(jid=add_jids[0], jobtype="add", args=[0, 10], queue=QUEUE))
        jobs = [Job(jid=jid, jobtype="add", args=[i + 1, 10], queue=QUEUE) for i, jid in enumerate(add_jids[1:])]
        jobs.append(Job(jid=echo_jid, jobtype="echo", args=[TEXT], queue=QUEUE))
        jobs.append(Job(jid=flaky_jid, jobtype="flaky", args=[7], queue=QUEUE, retry=3))
        rejected = producer.push_bulk(jobs)
    emit("pushed", add=add_jids, flaky=flaky_jid, echo=echo_jid, rejected=rejected)

    client = Client(faktory_url=URL, role="consumer", worker_id=os.environ["WID"], beat_period=1)
    client.connect()
    ack, fail = client._ack, client._fail

    def recording_ack(jid):
        ack(jid=jid)
        emit("ack", jid=jid)

    def recording_fail(jid, errtype, message, backtrace):
        fail(jid=jid, errtype=errtype, message=message, backtrace=backtrace)
        emit("fail", jid=jid, errtype=errtype, message=message)

    client._ack, client._fail = recording_ack, recording_fail
    consumer = Consumer(client=client, queues=[QUEUE], priority="strict", concurrency=2, grace_period=1)
    consumer.register("add", add)
    consumer.register("flaky", flaky)
    consumer.register("echo", echo)
    try:
        consumer.run()  # returns only by exiting, once told to terminate
    except SystemExit:
        pass
    emit("stopped", state=str(client.state))
    return 0


if __name__ == "__main__":
    sys.exit(main())
