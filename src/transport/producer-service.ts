import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Engine, SubmitResult } from "../engine/engine.js";
import type { ChildCursor } from "../engine/store.js";
import type { SubmitInput } from "../model/job.js";
import { JobState, type JobSpec } from "@worq/client/gen/worq/v1/job_pb.js";
import { WorqError, invalid, notBuilt } from "../model/errors.js";
import type { Logger } from "../log.js";
import { BatchShape, ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { durationMsOf, jobOf, stateOf, submitInputOf } from "./convert.js";
import { toConnectError } from "./error-mapping.js";
import { scopeOf } from "./auth/caller-context.js";
import { checkJobAccess, scopeSubmits } from "./auth/scoped-calls.js";
import { guarded } from "./handler-guard.js";
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
    // eslint-disable-next-line require-yield -- refuses before streaming anything
    watchJob: async function* () {
      try {
        notBuilt("WatchJob");
      } catch (error) {
        throw toConnectError(error, log, "WatchJob");
      }
    },
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
  };
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
  return { jid: result.jid, duplicate: result.duplicate, state: result.state === undefined ? JobState.UNSPECIFIED : stateOf(result.state) };
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
