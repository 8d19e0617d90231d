import { clone, type DescMethod } from "@bufbuild/protobuf";
import fc from "fast-check";
import {
  ProducerService,
  type SubmitBatchRequest,
  type SubmitBatchResponse,
  type SubmitRequest,
  type SubmitResponse,
} from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { ExhaustedAction, JobSpecSchema, Priority, type Job, type JobSpec } from "@worq/client/gen/worq/v1/job_pb.js";
import { messageArbitrary } from "./proto-arbitrary.js";

/**
 * Each job a Submit or SubmitBatch accepted, with the spec it was sent as and its answer;
 * none for any other RPC.
 */
export function acceptedJobs(method: DescMethod, request: unknown, response: unknown): { spec?: JobSpec; answer: SubmitResponse }[] {
  if (method.name === ProducerService.method.submit.name)
    return [{ spec: (request as SubmitRequest).job, answer: response as SubmitResponse }];
  if (method.name === ProducerService.method.submitBatch.name)
    return (response as SubmitBatchResponse).jobs.map((answer, i) => ({ spec: (request as SubmitBatchRequest).jobs[i], answer }));
  return [];
}

/**
 * Random messages hardly ever hold a job the server takes (a bad time, enum or duration in
 * some field refuses it), so the read-back would check nothing: random JobSpecs (the same
 * arbitrary) with the fields that refuse most left unset (times, durations, retry, trace,
 * dependencies, uniqueness, debounce, batch links) and a valid priority, type and, often, a
 * queue of `queues` (say one of each engine or partition). About half are accepted.
 */
export function plausibleJobSpec(queues: readonly string[]): fc.Arbitrary<JobSpec> {
  return fc
    .tuple(
      messageArbitrary(JobSpecSchema),
      fc.constantFrom(Priority.UNSPECIFIED, Priority.LOW, Priority.NORMAL, Priority.HIGH, Priority.CRITICAL),
      fc.integer({ min: 0, max: 1000 }),
      fc.option(fc.constantFrom("", ...queues), { nil: undefined }),
    )
    .map(([random, priority, backtrace, queue]) => {
      const spec = clone(JobSpecSchema, random.message as JobSpec);
      for (const field of [
        "at",
        "delay",
        "reserveFor",
        "executionTimeout",
        "ttl",
        "retry",
        "dependsOn",
        "unique",
        "debounce",
        "trace",
      ] as const)
        spec[field] = undefined;
      Object.assign(spec, { batchRef: "", parentJid: "", callbackUrl: "", batchId: "", priority, backtrace });
      if (!spec.type) spec.type = "t";
      if (queue !== undefined) spec.queue = queue;
      return spec;
    });
}

/**
 * The accepted jobs a later random call may rightly have removed: those of a queue an OK
 * PurgeQueue named, those deleted once their attempts ran out (EXHAUSTED_ACTION_DISCARD: a
 * random Lease may have taken one and dropped it), and those waiting on such a job (a purged
 * dependency cancels its dependents, and a CANCELLED job is deleted when its ttl ends).
 */
export function mayBeGone(accepted: ReadonlyMap<string, Job>, purged: ReadonlySet<string>): Set<string> {
  const gone = new Set<string>();
  for (const [jid, job] of accepted) if (purged.has(job.queue) || job.retry?.onExhausted === ExhaustedAction.DISCARD) gone.add(jid);
  for (let size = -1; size !== gone.size;) {
    size = gone.size;
    for (const [jid, job] of accepted) if (job.dependsOn.some((dependency) => gone.has(dependency))) gone.add(jid);
  }
  return gone;
}
