import type { ServiceImpl } from "@connectrpc/connect";
import type { Engine, SubmitResult } from "../engine/engine.js";
import { JobState } from "../../gen/ts/worq/v1/job_pb.js";
import { WorqError, invalid } from "../engine/errors.js";
import type { Logger } from "../log.js";
import { BatchShape, ProducerService } from "../../gen/ts/worq/v1/producer_service_pb.js";
import { durationMsOf, jobOf, stateOf, submitInputOf } from "./convert.js";
import { toConnectError } from "./error-mapping.js";
import { guarded } from "./handler-guard.js";

/** worq.v1.ProducerService: decode, call the engine, encode. */
export function createProducerService(engine: Engine, log: Logger): ServiceImpl<typeof ProducerService> {
  return {
    submit: guarded("Submit", log, async (request) => {
      const [result] = await engine.submit([submitInputOf(request.job, "job")], () => "job");
      return responseOf(result!);
    }),
    submitBatch: guarded("SubmitBatch", log, async (request) => {
      const inputs = request.jobs.map((job, i) => submitInputOf(job, `jobs[${i}]`));
      const shape = request.shape === BatchShape.CHAIN ? "CHAIN" : request.shape === BatchShape.FAN_IN ? "FAN_IN" : undefined;
      if (shape === undefined && request.shape !== BatchShape.UNSPECIFIED) invalid("shape", `unknown value ${request.shape}`);
      const results = await engine.submit(inputs, (i) => `jobs[${i}]`, shape);
      return { jobs: results.map(responseOf) };
    }),
    run: guarded("Run", log, async (request, ctx) => {
      const waitMs = request.waitTimeout ? durationMsOf(request.waitTimeout, "wait_timeout") : 0;
      const [submitted] = await engine.submit([submitInputOf(request.job, "job")], () => "job");
      // The jid travels in a trailer too, so a caller whose wait ran out can still follow the job.
      ctx.responseTrailer.set("worq-jid", submitted!.jid);
      try {
        return { job: jobOf(await engine.waitFinished(submitted!.jid, waitMs, ctx.signal)) };
      } catch (error) {
        throw withJidMetadata(error, submitted!.jid);
      }
    }),
    getResult: guarded("GetResult", log, async (request, ctx) => {
      const waitMs = request.waitTimeout ? durationMsOf(request.waitTimeout, "wait_timeout") : 0;
      return { job: jobOf(await engine.waitFinished(request.jid, waitMs, ctx.signal)) };
    }),
    cancel: guarded("Cancel", log, async (request) => ({ job: jobOf(await engine.cancel(request.jid)) })),
  };
}

/** The error as a ConnectError carrying the submitted job's id in `worq-jid` metadata. */
function withJidMetadata(error: unknown, jid: string): unknown {
  if (!(error instanceof WorqError)) return error;
  const connectError = toConnectError(error, { error: () => {} }, "Run");
  connectError.metadata.set("worq-jid", jid);
  return connectError;
}

function responseOf(result: SubmitResult) {
  return { jid: result.jid, duplicate: result.duplicate, state: result.state === undefined ? JobState.UNSPECIFIED : stateOf(result.state) };
}
