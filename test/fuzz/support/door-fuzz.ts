import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import fc from "fast-check";
import { expect } from "vitest";
import { AdminService, type PurgeQueueRequest } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { BatchShape, ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import type { Job } from "@worq/client/gen/worq/v1/job_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { LIMITS } from "../../../src/model/limits.js";
import type { WorqClients } from "../../e2e/support/clients.js";
import { fuzzEveryRpc, fuzzRpc } from "./fuzz-every-rpc.js";
import { acceptedJobs, mayBeGone, plausibleJobSpec } from "./plausible-jobs.js";
import { EVERY_LISTING, expectListedAndReadable } from "./read-back.js";

type Admin = WorqClients["admin"];

interface DoorFuzz {
  runs: number;
  seed: number;
  /** Answers counted by code name, added to. */
  codes: Map<string, number>;
}

/**
 * The producer's half of a door's fuzz: random messages of ProducerService's RPCs through
 * `transport`, then plausible Submits and SubmitBatches of `queues` (twice as many). Each job
 * accepted reads back at once through `reader`, as sent unless another job was answered, and
 * `placed` checks where it went. Answers the accepted jobs by jid.
 */
export async function fuzzProducerCalls(
  transport: Transport,
  reader: Admin,
  queues: readonly string[],
  options: DoorFuzz & { placed?: (job: Job) => void },
): Promise<Map<string, Job>> {
  const accepted = new Map<string, Job>();
  const readBackAtOnce = async (method: DescMethod, request: unknown, response: unknown) => {
    for (const { spec, answer } of acceptedJobs(method, request, response)) {
      const job = (await reader.getJob({ jid: answer.jid })).job;
      expect(job?.jid, `${method.name} accepted ${answer.jid}, which GetJob does not read back: ${JSON.stringify(request)}`).toBe(
        answer.jid,
      );
      options.placed?.(job!);
      if (!answer.duplicate && !answer.debounced) expect([job!.type, job!.queue]).toEqual([spec!.type, spec!.queue || LIMITS.defaultQueue]);
      accepted.set(answer.jid, job!);
    }
  };
  const { runs, seed, codes } = options;
  await fuzzEveryRpc(transport, { runs, seed, codes, services: [ProducerService], answered: readBackAtOnce });
  const plausible = { runs: runs * 2, seed, codes, answered: readBackAtOnce };
  await fuzzRpc(transport, ProducerService, ProducerService.method.submit, fc.record({ job: plausibleJobSpec(queues) }), plausible);
  await fuzzRpc(
    transport,
    ProducerService,
    ProducerService.method.submitBatch,
    fc.record({
      jobs: fc.array(plausibleJobSpec(queues), { minLength: 1, maxLength: 4 }),
      shape: fc.constantFrom(BatchShape.UNSPECIFIED, BatchShape.CHAIN, BatchShape.FAN_IN),
    }),
    plausible,
  );
  return accepted;
}

/** The worker's and the operator's half: random messages of their RPCs through `transport`. Answers the queues an OK PurgeQueue named. */
export async function fuzzWorkerAndAdminCalls(transport: Transport, options: DoorFuzz): Promise<Set<string>> {
  const purged = new Set<string>();
  await fuzzEveryRpc(transport, {
    ...options,
    services: [WorkerService, AdminService],
    answered: (method, request) => {
      if (method.name === AdminService.method.purgeQueue.name) purged.add((request as PurgeQueueRequest).queue);
    },
  });
  return purged;
}

/**
 * After both halves: every job `reader` holds is listed once through it (in every listing) and
 * reads by its jid, `placed` among them; each accepted one still is, unless a later random call
 * may rightly have removed it (mayBeGone): then it reads back or is NOT_FOUND, whichever.
 * Answers the jids listed and how many of the accepted were removed.
 */
export async function expectAcceptedKept(
  reader: Admin,
  accepted: ReadonlyMap<string, Job>,
  purged: ReadonlySet<string>,
  placed: Iterable<string>,
): Promise<{ listed: string[]; removed: number }> {
  const gone = mayBeGone(accepted, purged);
  const kept = [...accepted.keys()].filter((jid) => !gone.has(jid));
  const listed = await expectListedAndReadable(reader, reader, [...kept, ...placed], EVERY_LISTING);
  let removed = 0;
  for (const jid of gone) {
    const read = await reader.getJob({ jid }).catch((error: unknown) => ConnectError.from(error));
    if (read instanceof ConnectError) {
      expect(read.code, `GetJob ${jid}: ${read.rawMessage}`).toBe(Code.NotFound);
      removed++;
    } else expect(listed).toContain(read.job?.jid);
  }
  return { listed, removed };
}
