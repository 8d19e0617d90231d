import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Engine, LeaseGrant } from "../engine/engine.js";
import type { LeaseSession } from "../engine/engine-types.js";
import type { Logger } from "../log.js";
import { invalid, WorqError } from "../model/errors.js";
import {
  ControlAction,
  ItemResultSchema,
  LeaseResponseSchema,
  QueueOrder,
  WorkerService,
  type ItemResult,
  type LeaseRequest,
} from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { durationMsOf, failureReportOf, stateOf } from "./convert.js";
import { toConnectError } from "./error-mapping.js";
import { scopeOf } from "./auth/caller-context.js";
import { ackAllInScope, checkJobAccess, checkLeaseQueues } from "./auth/scoped-calls.js";
import { guarded } from "./handler-guard.js";
import { Outbox } from "./outbox.js";
import { leaseResponseOf, type LeaseAnswer } from "./lease-answer.js";
import type { ItemOutcome, ReportAnswer, ReportItems } from "./report-wire.js";
import { markLatency } from "@worq/client/latency-marks.js";

export interface WorkerServiceOptions {
  /** An idle Lease stream gets a keepalive message this often (must stay under 30 s). */
  keepaliveIntervalMs: number;
}

/**
 * worq.v1.WorkerService's handlers, Lease yielding LeaseAnswers (leased jobs as grants) for
 * each door to write its own way: the gRPC server by hand, the Connect side through
 * connectWorkerService.
 */
export type WorkerHandlers = Omit<ServiceImpl<typeof WorkerService>, "lease"> & {
  lease(request: LeaseRequest, ctx: HandlerContext): AsyncGenerator<LeaseAnswer>;
};

interface OutboxEntry {
  message: LeaseAnswer;
  /** The stream ends after this message. */
  last: boolean;
}

/** worq.v1.WorkerService: Lease as an async generator over the engine's push sessions. */
export function createWorkerService(engine: Engine, log: Logger, options: WorkerServiceOptions): WorkerHandlers {
  /** The open Lease streams by the id their keepalives carry (SetLeaseCredits names one). */
  const streams = new Map<string, { session: LeaseSession; queues: readonly string[] }>();

  async function* lease(request: LeaseRequest, ctx: HandlerContext): AsyncGenerator<LeaseAnswer> {
    const outbox = new Outbox<OutboxEntry>(options.keepaliveIntervalMs, ctx.signal);
    let session: LeaseSession;
    try {
      checkLeaseQueues(scopeOf(ctx), request.queues);
      session = engine.openLease(
        {
          queues: [...request.queues],
          workerId: request.workerId,
          credits: request.credits,
          labels: { ...request.labels },
          order: queueOrderOf(request.order),
        },
        {
          deliver: (grants: LeaseGrant[]) => {
            markLatency("lease.deliver", grants.length);
            outbox.push({ message: { grants }, last: false });
          },
          control: (action, reason) =>
            outbox.push({
              message: create(LeaseResponseSchema, {
                kind: { case: "control", value: { action: ControlAction[action], reason } },
              }),
              last: action !== "QUIET",
            }),
          revoke: (jid, leaseId, reason) =>
            outbox.push({
              message: create(LeaseResponseSchema, { kind: { case: "revoked", value: { jid, leaseId, reason } } }),
              last: false,
            }),
          ...(request.reportWaiting && {
            waiting: (waiting: boolean) =>
              outbox.push({ message: create(LeaseResponseSchema, { kind: { case: "waiting", value: { waiting } } }), last: false }),
          }),
        },
      );
    } catch (error) {
      throw toConnectError(error, log, "Lease");
    }
    const streamId = session.streamId;
    streams.set(streamId, { session, queues: request.queues });
    const keepalive = create(LeaseResponseSchema, { kind: { case: "keepalive", value: { streamId } } });
    log.info("worker connected", { workerId: request.workerId, queues: request.queues, credits: request.credits });
    // Closed the moment the server hears of the cancel, not once this generator next resumes:
    // a report processed in between would free a slot the engine refills into a stream that
    // is gone, and that job would wait out the orphan grace.
    const closeOnCancel = () => session.close();
    ctx.signal.addEventListener("abort", closeOnCancel, { once: true });
    try {
      // The first message confirms the stream is registered, so a worker knows it is connected.
      yield keepalive;
      for (;;) {
        const next = await outbox.next();
        if (next.kind === "aborted") return;
        if (next.kind === "timeout") {
          yield keepalive;
          continue;
        }
        yield next.item.message;
        if (next.item.last) return;
      }
    } finally {
      ctx.signal.removeEventListener("abort", closeOnCancel);
      streams.delete(streamId);
      session.close();
      log.info("worker disconnected", {
        workerId: request.workerId,
        reason: ctx.signal.aborted ? "stream cancelled" : "server ended stream",
      });
    }
  }

  /** Runs one item of a batch call, turning its error into a per-item status. */
  async function item(jid: string, run: () => Promise<{ state?: JobState }>): Promise<ItemResult> {
    try {
      return create(ItemResultSchema, { jid, ...(await run()) });
    } catch (error) {
      const connectError = toConnectError(error, log, "Report");
      return create(ItemResultSchema, { jid, code: connectError.code, message: connectError.rawMessage });
    }
  }

  return {
    lease,
    ack: guarded("Ack", log, async (request, ctx) => {
      await checkJobAccess(engine, scopeOf(ctx), request.jid);
      await engine.ack(request.jid, request.leaseId, request.result);
      return {};
    }),
    fail: guarded("Fail", log, async (request, ctx) => {
      await checkJobAccess(engine, scopeOf(ctx), request.jid);
      const outcome = await engine.fail(request.jid, request.leaseId, failureReportOf(request, ""));
      return {
        state: outcome.state === null ? JobState.UNSPECIFIED : stateOf(outcome.state),
        ...(outcome.retryAtMs !== undefined ? { retryAt: timestampFromMs(outcome.retryAtMs) } : {}),
      };
    }),
    renew: guarded("Renew", log, async (request, ctx) => {
      const scope = scopeOf(ctx);
      const results = await Promise.all(
        request.leases.map(async (ref, i) => {
          try {
            await checkJobAccess(engine, scope, ref.jid);
            const executionTimeoutMs = ref.executionTimeout
              ? durationMsOf(ref.executionTimeout, `leases[${i}].execution_timeout`)
              : undefined;
            const expiresAtMs = await engine.renew(ref.jid, ref.leaseId, `leases[${i}].`, executionTimeoutMs);
            return { jid: ref.jid, code: 0, message: "", leaseExpiresAt: timestampFromMs(expiresAtMs) };
          } catch (error) {
            const connectError = toConnectError(error, log, "Renew");
            return { jid: ref.jid, code: connectError.code, message: connectError.rawMessage };
          }
        }),
      );
      return { results };
    }),
    report: guarded("Report", log, async (request: ReportItems, ctx: HandlerContext): Promise<ReportAnswer> => {
      const scope = scopeOf(ctx);
      const refusals = await ackAllInScope(
        engine,
        scope,
        request.acks.map((ack, i) => ({ jid: ack.jid, leaseId: ack.leaseId, result: ack.result, field: `acks[${i}].` })),
      );
      const ackOutcomes = request.acks.map((ack, i): ItemOutcome => {
        const refusal = refusals[i];
        if (!refusal) return { jid: ack.jid, code: 0, message: "" };
        const connectError = toConnectError(refusal, log, "Report");
        return { jid: ack.jid, code: connectError.code, message: connectError.rawMessage };
      });
      const fails = await Promise.all(
        request.fails.map((fail, i) =>
          item(fail.jid, async () => {
            await checkJobAccess(engine, scope, fail.jid);
            const outcome = await engine.fail(fail.jid, fail.leaseId, failureReportOf(fail, `fails[${i}].`), `fails[${i}].`);
            return { state: outcome.state === null ? JobState.UNSPECIFIED : stateOf(outcome.state) };
          }),
        ),
      );
      return { acks: ackOutcomes, fails };
    }),
    checkpoint: guarded("Checkpoint", log, async (request, ctx) => {
      await checkJobAccess(engine, scopeOf(ctx), request.jid);
      await engine.checkpoint(request.jid, request.leaseId, request.data);
      return {};
    }),
    setLeaseCredits: guarded("SetLeaseCredits", log, async (request, ctx) => {
      if (!request.streamId) invalid("stream_id", "is required");
      const stream = streams.get(request.streamId);
      // A stream of queues the caller may not lease is not its to change: not found, as a job would be.
      if (!stream || !stream.queues.every((queue) => scopeOf(ctx).allows(queue))) {
        throw new WorqError("WORQ_NOT_FOUND", `stream_id: no open Lease stream ${request.streamId}`, "stream_id");
      }
      return { held: stream.session.setCredits(request.credits) };
    }),
    reportProgress: guarded("ReportProgress", log, async (request, ctx) => {
      await checkJobAccess(engine, scopeOf(ctx), request.jid);
      await engine.reportProgress(request.jid, request.leaseId, request.percent, request.message);
      return {};
    }),
  };
}

/** The worker service as the Connect side mounts it: leased jobs as LeasedJob messages, which protobuf-es writes as binary or JSON. */
export function connectWorkerService(handlers: WorkerHandlers): ServiceImpl<typeof WorkerService> {
  return {
    ...handlers,
    async *lease(request, ctx) {
      for await (const answer of handlers.lease(request, ctx)) yield leaseResponseOf(answer);
    },
  };
}

function queueOrderOf(order: QueueOrder): "LISTED" | "RANDOM" {
  if (order === QueueOrder.UNSPECIFIED || order === QueueOrder.LISTED) return "LISTED";
  if (order === QueueOrder.RANDOM) return "RANDOM";
  return invalid("order", `unknown value ${order}`);
}
