#!/usr/bin/env python3
"""Interop smoke test: drives a running Worq server through the generated Python stubs.

Submit -> Lease -> Ack -> GetJob, plus one INVALID_ARGUMENT check. Prints one JSON line
on stdout and exits 0 when every check passed, 1 (with the reason on stderr and in the
JSON line) otherwise.

    .tools/venv/bin/python test/interop/python/smoke.py --addr 127.0.0.1:PORT
"""

import argparse
import json
import os
import sys

import grpc
from google.protobuf import struct_pb2

try:
    from worq.v1 import admin_service_pb2, admin_service_pb2_grpc
    from worq.v1 import job_pb2
    from worq.v1 import producer_service_pb2, producer_service_pb2_grpc
    from worq.v1 import worker_service_pb2, worker_service_pb2_grpc
except ImportError:
    # Not installed (scripts/install-test-tools.sh installs it): use the checked-in copy.
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "gen", "python", "src"))
    from worq.v1 import admin_service_pb2, admin_service_pb2_grpc
    from worq.v1 import job_pb2
    from worq.v1 import producer_service_pb2, producer_service_pb2_grpc
    from worq.v1 import worker_service_pb2, worker_service_pb2_grpc

JOB_TYPE = "py.smoke"
QUEUE = "py-smoke"
WORKER_ID = "py-smoke-1"
ARGS = [1, "two"]
PAYLOAD = b"hello"
RESULT = b"py-done"


class SmokeFailure(Exception):
    pass


def check(cond, message):
    if not cond:
        raise SmokeFailure(message)


def rpc_error(step, err):
    return SmokeFailure(f"{step} failed: {err.code().name}: {err.details()}")


def run(addr, timeout, report):
    with grpc.insecure_channel(addr) as channel:
        producer = producer_service_pb2_grpc.ProducerServiceStub(channel)
        worker = worker_service_pb2_grpc.WorkerServiceStub(channel)
        admin = admin_service_pb2_grpc.AdminServiceStub(channel)

        args = struct_pb2.ListValue()
        args.extend(ARGS)
        spec = job_pb2.JobSpec(type=JOB_TYPE, queue=QUEUE, args=args, payload=PAYLOAD)
        try:
            submitted = producer.Submit(producer_service_pb2.SubmitRequest(job=spec), timeout=timeout)
        except grpc.RpcError as err:
            raise rpc_error("Submit", err)
        jid = submitted.jid
        report["jid"] = jid
        report["submit_state"] = job_pb2.JobState.Name(submitted.state)
        check(jid, "Submit returned an empty jid")

        # The stream's deadline bounds the wait for the job; it is cancelled once acked.
        stream = worker.Lease(
            worker_service_pb2.LeaseRequest(queues=[QUEUE], worker_id=WORKER_ID, credits=1),
            timeout=timeout,
        )
        try:
            leased = None
            keepalives = 0
            try:
                for message in stream:
                    kind = message.WhichOneof("kind")
                    if kind == "keepalive":
                        keepalives += 1
                        continue
                    check(kind == "jobs", f"unexpected Lease message before the job: {kind} {message}")
                    check(len(message.jobs.jobs) == 1, f"credits=1 but got {len(message.jobs.jobs)} jobs")
                    leased = message.jobs.jobs[0]
                    break
            except grpc.RpcError as err:
                raise rpc_error("Lease", err)
            check(leased is not None, "Lease stream ended without a job")
            report["keepalives_skipped"] = keepalives
            job = leased.job
            report["lease_id"] = leased.lease_id
            report["attempt"] = job.attempt
            check(job.jid == jid, f"leased jid {job.jid!r}, submitted {jid!r}")
            check(leased.lease_id, "leased job has an empty lease_id")
            check(job.type == JOB_TYPE, f"leased type {job.type!r}")
            check(job.queue == QUEUE, f"leased queue {job.queue!r}")
            check(job.payload == PAYLOAD, f"leased payload {job.payload!r}")
            check(list(job.args) == ARGS, f"leased args {list(job.args)!r}, want {ARGS!r}")

            # Ack while the stream is still open: the lease belongs to this worker's stream.
            try:
                worker.Ack(
                    worker_service_pb2.AckRequest(jid=jid, lease_id=leased.lease_id, result=RESULT),
                    timeout=timeout,
                )
            except grpc.RpcError as err:
                raise rpc_error("Ack", err)
        finally:
            stream.cancel()

        try:
            got = admin.GetJob(admin_service_pb2.GetJobRequest(jid=jid), timeout=timeout).job
        except grpc.RpcError as err:
            raise rpc_error("GetJob", err)
        report["state"] = job_pb2.JobState.Name(got.state)
        report["result"] = got.result.decode("utf-8", "replace")
        check(got.state == job_pb2.JOB_STATE_COMPLETED, f"GetJob state {report['state']}, want JOB_STATE_COMPLETED")
        check(got.result == RESULT, f"GetJob result {got.result!r}, want {RESULT!r}")

        try:
            bad = producer.Submit(
                producer_service_pb2.SubmitRequest(job=job_pb2.JobSpec(type="", queue=QUEUE)), timeout=timeout
            )
        except grpc.RpcError as err:
            report["empty_type"] = {"code": err.code().name, "details": err.details()}
            check(
                err.code() == grpc.StatusCode.INVALID_ARGUMENT,
                f"Submit with an empty type: {err.code().name}, want INVALID_ARGUMENT",
            )
        else:
            raise SmokeFailure(f"Submit with an empty type succeeded (jid {bad.jid}), want INVALID_ARGUMENT")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", required=True, help="server gRPC address, host:port")
    parser.add_argument("--timeout", type=float, default=10.0, help="deadline of each step, seconds")
    opts = parser.parse_args()

    report = {"client": "python", "grpcio": grpc.__version__, "addr": opts.addr}
    try:
        run(opts.addr, opts.timeout, report)
    except SmokeFailure as err:
        report.update(ok=False, error=str(err))
        print(json.dumps(report), flush=True)
        print(f"python smoke: FAIL: {err}", file=sys.stderr)
        return 1
    report["ok"] = True
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
