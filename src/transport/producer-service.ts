import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Engine, JobChange, SubmitResult } from "../engine/engine.js";
import type { ChildCursor } from "../engine/store.js";
import { isTerminal, type JobProgress, type JobView, type SubmitInput } from "../model/job.js";
import { JobState, type JobSpec } from "@worq/client/gen/worq/v1/job_pb.js";
import { WorqError, invalid } from "../model/errors.js";
import type { Logger } from "../log.js";
import { BatchShape, ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { durationMsOf, jobOf, stateOf, submitInputOf } from "./convert.js";
import { toConnectError } from "./error-mapping.js";
import { batchInputOf, batchOf } from "./batch-convert.js";
import { scopeOf } from "./auth/caller-context.js";
import { checkJobAccess, scopeSubmits } from "./auth/scoped-calls.js";
import { guarded } from "./handler-guard.js";
import { Outbox } from "./outbox.js";
import { submitInputOfWire, type SubmitBatchAnswer, type SubmitOutcome } from "./submit-wire.js";

/**
 * A submitted job as the request carries it: a JobSpec message, or its bytes when the
 * transport hands requests over undecoded (gRPC, submit-wire.ts).
 */
type SubmittedJob = JobSpec | Uint8Array | undefined;

/**
 * worq.v1.ProducerService: decode, call the engine, answer. SubmitBatch answers plain
 * outcomes, which the gRPC server writes by hand (submit-wire.ts) and the Connect side
 * through protobuf-es.
 */
export function createProducerService(engine: Engine, log: Logger): ServiceImpl<typeof ProducerService> {
  return {
    submit: guarded("Submit", log, async (request: { job?: SubmittedJob }, ctx: HandlerContext) => {
      const inputs = await scopeSubmits(engine, scopeOf(ctx), [inputOf(request.job, "job")], () => "job");
      const [result] = await engine.submit(inputs, () => "job", undefined, ctx.timeoutMs());
      return responseOf(result!);
    }),
    submitBatch: guarded(
      "SubmitBatch",
      log,
      async (request: { jobs: readonly SubmittedJob[]; shape: number }, ctx: HandlerContext): Promise<SubmitBatchAnswer> => {
        const fieldOf = (i: number) => `jobs[${i}]`;
        const inputs = await scopeSubmits(
          engine,
          scopeOf(ctx),
          request.jobs.map((job, i) => inputOf(job, fieldOf(i))),
          fieldOf,
        );
        const shape = request.shape === BatchShape.CHAIN ? "CHAIN" : request.shape === BatchShape.FAN_IN ? "FAN_IN" : undefined;
        if (shape === undefined && request.shape !== BatchShape.UNSPECIFIED) invalid("shape", `unknown value ${request.shape}`);
        return { jobs: (await engine.submit(inputs, fieldOf, shape, ctx.timeoutMs())).map(responseOf) };
      },
    ),
    run: guarded("Run", log, async (request, ctx) => {
      const waitMs = request.waitTimeout ? durationMsOf(request.waitTimeout, "wait_timeout") : 0;
      const inputs = await scopeSubmits(engine, scopeOf(ctx), [submitInputOf(request.job, "job")], () => "job");
      const [submitted] = await engine.submit(inputs, () => "job", undefined, ctx.timeoutMs());
      // The jid travels in a trailer too, so a caller whose wait ran out can still follow the job.
      ctx.responseTrailer.set("worq-jid", submitted!.jid);
      try {
        return { job: jobOf(await engine.waitFinished(submitted!.jid, waitMs, ctx.signal, true)) };
      } catch (error) {
        throw withJidMetadata(error, submitted!.jid);
      }
    }),
    getResult: guarded("GetResult", log, async (request, ctx) => {
      const waitMs = request.waitTimeout ? durationMsOf(request.waitTimeout, "wait_timeout") : 0;
      await checkJobAccess(engine, scopeOf(ctx), request.jid);
      return { job: jobOf(await engine.waitFinished(request.jid, waitMs, ctx.signal)) };
    }),
    cancel: guarded("Cancel", log, async (request, ctx) => {
      await checkJobAccess(engine, scopeOf(ctx), request.jid);
      return { job: jobOf(await engine.cancel(request.jid)) };
    }),
    watchJob: (request, ctx) => watchJob(engine, log, request.jid, ctx),
    collectChildren: guarded("CollectChildren", log, async (request, ctx) => {
      const waitMs = request.waitTimeout ? durationMsOf(request.waitTimeout, "wait_timeout") : 0;
      const scope = scopeOf(ctx);
      await checkJobAccess(engine, scope, request.parentJid);
      const page = await engine.collectChildren(request.parentJid, waitMs, ctx.signal, request.pageSize, childCursorOf(request.pageToken));
      return {
        // A token scoped to some queues does not see children in the others.
        children: page.children.filter((view) => scope.all || scope.allows(view.meta.queue)).map(jobOf),
        finished: page.finished,
        nextPageToken: page.next ? Buffer.from(JSON.stringify([page.next.createdAtMs, page.next.jid])).toString("base64url") : "",
      };
    }),
    createBatch: guarded("CreateBatch", log, async (request, ctx) => ({
      batch: batchOf(await engine.createBatch(batchInputOf(request.batch, scopeOf(ctx)))),
    })),
    sealBatch: guarded("SealBatch", log, async (request) => ({ batch: batchOf(await engine.sealBatch(request.id)) })),
    getBatch: guarded("GetBatch", log, async (request, ctx) => {
      const waitMs = request.wait ? durationMsOf(request.wait, "wait") : 0;
      return { batch: batchOf(await engine.getBatch(request.id, waitMs, ctx.signal)) };
    }),
  };
}

/** How often an idle WatchJob stream looks whether its caller went away, in ms. */
const WATCH_IDLE_CHECK_MS = 30_000;

/**
 * WatchJob: the job as it is now, then again after each change (a state change once durable,
 * a checkpoint, a progress report), until a terminal state (its message carries the result).
 * NOT_FOUND for an unknown job and for one deleted meanwhile. Progress reports that come
 * faster than the stream is read are merged: the next message carries the latest.
 */
async function* watchJob(engine: Engine, log: Logger, jid: string, ctx: HandlerContext): AsyncGenerator<{ job: ReturnType<typeof jobOf> }> {
  const outbox = new Outbox<JobChange>(WATCH_IDLE_CHECK_MS, ctx.signal);
  let stop: (() => void) | undefined;
  try {
    await checkJobAccess(engine, scopeOf(ctx), jid);
    // Follow first, then read: a change in between is not missed (at worst sent twice).
    // At most one report without a state change waits in the outbox: a caller that reads
    // slowly while a handler reports every 100 ms holds one, not one per report.
    let reportQueued = false;
    stop = engine.watchJob(jid, (change) => {
      if (change.kind === "changed" && change.meta === undefined) {
        if (reportQueued) return;
        reportQueued = true;
      }
      outbox.push(change);
    });
    let view = await engine.getJob(jid);
    yield { job: jobOf(view) };
    while (!isTerminal(view.meta.state)) {
      const next = await outbox.next();
      if (next.kind === "aborted") return;
      if (next.kind === "timeout") continue;
      const change = next.item;
      if (change.kind === "stopped")
        throw new WorqError("WORQ_UNAVAILABLE", "server is shutting down; watch the job again after reconnecting");
      if (change.kind === "deleted") throw new WorqError("WORQ_NOT_FOUND", `job ${jid} was deleted`, "jid");
      if (change.meta === undefined) {
        reportQueued = false;
        // A report without a state change is merged into the next message when one is queued.
        if (outbox.size > 0) continue;
      }
      const current = await engine.getJob(jid);
      view = changedView(current, change);
      yield { job: jobOf(view) };
    }
  } catch (error) {
    throw toConnectError(error, log, "WatchJob");
  } finally {
    stop?.();
  }
}

/**
 * The job as read now, in the state a state change left it in, with its progress then (a later
 * change may have moved it on: a new attempt starts without progress).
 */
function changedView(current: JobView, change: { meta?: JobView["meta"]; progress?: JobProgress }): JobView {
  const { meta, progress } = change;
  if (meta === undefined) return current;
  const view: JobView = { ...current, meta };
  if (meta.state !== "COMPLETED") delete view.result;
  if (progress) view.progress = progress;
  else delete view.progress;
  return view;
}

/** The error as a ConnectError carrying the submitted job's id in `worq-jid` metadata. */
function withJidMetadata(error: unknown, jid: string): unknown {
  if (!(error instanceof WorqError)) return error;
  const connectError = toConnectError(error, { error: () => {} }, "Run");
  connectError.metadata.set("worq-jid", jid);
  return connectError;
}

function inputOf(job: SubmittedJob, field: string): SubmitInput {
  return job instanceof Uint8Array ? submitInputOfWire(job, field) : submitInputOf(job, field);
}

function responseOf(result: SubmitResult): SubmitOutcome {
  return {
    jid: result.jid,
    duplicate: result.duplicate,
    state: result.state === undefined ? JobState.UNSPECIFIED : stateOf(result.state),
    debounced: result.debounced === true,
  };
}

/** The cursor a CollectChildren page token holds: [createdAtMs, jid]. */
function childCursorOf(pageToken: string): ChildCursor | undefined {
  if (!pageToken) return undefined;
  try {
    const [createdAtMs, jid] = JSON.parse(Buffer.from(pageToken, "base64url").toString("utf8")) as unknown[];
    if (typeof createdAtMs === "number" && Number.isFinite(createdAtMs) && typeof jid === "string" && jid.length <= 64)
      return { createdAtMs, jid };
  } catch {
    // refused below
  }
  return invalid("page_token", "is not a token this server issued");
}
