import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, createClient, type Transport } from "@connectrpc/connect";
import fc from "fast-check";
import { expect } from "vitest";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { callOnce } from "./call-once.js";
import { messageArbitrary } from "./proto-arbitrary.js";

/** A handler that threw something unexpected, or lost data: what fuzzing must never see. */
const BUG_CODES = new Set([Code.Internal, Code.Unknown, Code.DataLoss]);
/** Every service a producer, a worker and an operator call. */
const FUZZED_SERVICES: DescService[] = [ProducerService, WorkerService, AdminService];

export interface FuzzOptions {
  /** Inputs per RPC. */
  runs: number;
  seed: number;
  /** Answers counted by code name ("OK", "InvalidArgument", …), added to. */
  codes: Map<string, number>;
  /** Each unary call that succeeded, with its request and response; awaited before the next call. */
  answered?: (method: DescMethod, request: unknown, response: unknown) => void | Promise<void>;
}

/**
 * `runs` requests of `method` drawn from `requests`, each sent once over `transport`
 * (callOnce): every answer is OK or an error that carries a message and is not INTERNAL,
 * UNKNOWN or DATA_LOSS. The first failing input ends the run (fast-check prints it and the seed).
 */
export async function fuzzRpc(
  transport: Transport,
  service: DescService,
  method: DescMethod,
  requests: fc.Arbitrary<unknown>,
  options: FuzzOptions,
): Promise<void> {
  const { runs, seed, codes, answered } = options;
  const client = createClient(service, transport) as unknown as Record<string, (request: unknown, options: object) => unknown>;
  await fc.assert(
    fc.asyncProperty(requests, async (request) => {
      let response: unknown;
      const error = await callOnce(client, method, request, (answer) => (response = answer));
      const code = error === undefined ? "OK" : Code[error.code]!;
      codes.set(code, (codes.get(code) ?? 0) + 1);
      if (error !== undefined) {
        expect(BUG_CODES.has(error.code), `${method.name} answered ${code}: ${error.rawMessage}`).toBe(false);
        expect(error.rawMessage.length, `${method.name} answered ${code} without a message`).toBeGreaterThan(0);
      }
      if (response !== undefined) await answered?.(method, request, response);
    }),
    { numRuns: runs, seed, endOnFailure: true },
  );
}

/**
 * fuzzRpc of every RPC of `services` (all three when not given), in order, with random
 * messages of its request type (messageArbitrary): any field set or not, any value its type holds.
 */
export async function fuzzEveryRpc(transport: Transport, options: FuzzOptions & { services?: DescService[] }): Promise<void> {
  for (const service of options.services ?? FUZZED_SERVICES)
    for (const method of service.methods)
      await fuzzRpc(
        transport,
        service,
        method,
        messageArbitrary(method.input).map((request) => request.message),
        options,
      );
}
