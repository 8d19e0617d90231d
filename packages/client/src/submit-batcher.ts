import { WireType } from "@bufbuild/protobuf/wire";
import { encoded } from "./wire/wire-writer.js";
import { Code } from "@connectrpc/connect";
import { readString, readTag, skipField, WireReader } from "./wire/json-value.js";
import { toClientError } from "./errors.js";
import type { GrpcLink } from "./grpc-link.js";

/** What the server made of one submitted job (worq.v1.SubmitResponse). */
export interface SubmitOutcome {
  /** The job's id: a new job's, or the earlier job's a duplicate or debounced submit names. */
  jid: string;
  /** An earlier job with the same idempotency key, or holding the same unique key, was answered instead. */
  duplicate: boolean;
  /** A waiting job with the same debounce key took this submit's data and new start time. */
  debounced: boolean;
  /** The job's state (a JobState number; 0 when the server did not say). */
  state: number;
}

/**
 * One SubmitBatch call with encoded JobSpecs (encodeJobSpec); resolves with the outcomes in
 * order. The request is SubmitBatchRequest.jobs (field 1) and the answer is read field by
 * field (SubmitBatchResponse.jobs, field 1), without building messages.
 */
export async function submitBatchCall(link: GrpcLink, specs: readonly Uint8Array[]): Promise<SubmitOutcome[]> {
  const request = encoded((w) => {
    for (const spec of specs) w.tag(1, WireType.LengthDelimited).bytes(spec);
  });
  const r = new WireReader(await link.unary("/worq.v1.ProducerService/SubmitBatch", request));
  const outcomes: SubmitOutcome[] = [];
  while (r.pos < r.len) {
    const tag = readTag(r);
    if (tag === ((1 << 3) | WireType.LengthDelimited)) outcomes.push(readOutcome(r, r.uint32() + r.pos));
    else skipField(r, tag & 7, tag >>> 3);
  }
  return outcomes;
}

/** One Submit call (SubmitRequest.job, field 1); resolves with its SubmitResponse. */
async function submitCall(link: GrpcLink, spec: Uint8Array): Promise<SubmitOutcome> {
  const request = encoded((w) => w.tag(1, WireType.LengthDelimited).bytes(spec));
  const r = new WireReader(await link.unary("/worq.v1.ProducerService/Submit", request));
  return readOutcome(r, r.len);
}

/** The SubmitResponse (jid 1, duplicate 2, state 3, debounced 4) occupying r.pos..end. */
function readOutcome(r: WireReader, end: number): SubmitOutcome {
  const outcome: SubmitOutcome = { jid: "", duplicate: false, debounced: false, state: 0 };
  while (r.pos < end) {
    const tag = readTag(r);
    if (tag === ((1 << 3) | WireType.LengthDelimited)) outcome.jid = readString(r);
    else if (tag === ((2 << 3) | WireType.Varint)) outcome.duplicate = r.uint32() !== 0;
    else if (tag === ((3 << 3) | WireType.Varint)) outcome.state = r.int32();
    else if (tag === ((4 << 3) | WireType.Varint)) outcome.debounced = r.uint32() !== 0;
    else skipField(r, tag & 7, tag >>> 3);
  }
  return outcome;
}

interface Pending {
  spec: Uint8Array;
  resolve: (outcome: SubmitOutcome) => void;
  reject: (error: unknown) => void;
}

/** The largest batch sent in one call (the server takes up to 10,000). */
const MAX_BATCH = 1000;

/**
 * Coalesces concurrent `submit` calls into SubmitBatch calls, as ioredis auto-pipelines for
 * BullMQ: up to two calls in flight; whatever arrives meanwhile goes out together next. A lone
 * submit goes out as Submit. A batch refused because of one job (SubmitBatch is atomic, and
 * names it as jobs[i]) is resent without it, and that job alone fails, with its own error.
 */
export class SubmitBatcher {
  private queue: Pending[] = [];
  private inFlight = 0;

  constructor(
    private readonly link: GrpcLink,
    private readonly maxInFlight = 2,
  ) {}

  submit(spec: Uint8Array): Promise<SubmitOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ spec, resolve, reject });
      // A microtask, not setImmediate: submits made in the same turn still go out together,
      // and a lone submit leaves without waiting for the next event-loop iteration (pickup latency).
      if (this.inFlight < this.maxInFlight) queueMicrotask(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    if (this.inFlight >= this.maxInFlight || this.queue.length === 0) return;
    const batch = this.queue.splice(0, MAX_BATCH);
    this.inFlight++;
    try {
      if (batch.length === 1) await this.sendOne(batch[0]!);
      else {
        try {
          const outcomes = await submitBatchCall(
            this.link,
            batch.map((item) => item.spec),
          );
          batch.forEach((item, i) => item.resolve(outcomes[i]!));
        } catch (error) {
          const clientError = toClientError(error);
          const code = clientError.code;
          const culprit = /^jobs\[(\d+)\]/.exec(clientError.message);
          if (culprit && Number(culprit[1]) < batch.length) {
            // One job spoiled the atomic batch: it alone gets its own error (as a single
            // submit), and the rest go out again.
            const [bad] = batch.splice(Number(culprit[1]), 1);
            this.queue.unshift(...batch);
            await this.sendOne(bad!);
          } else if (code === Code.InvalidArgument || code === Code.ResourceExhausted || code === Code.PermissionDenied) {
            await Promise.all(batch.map((item) => this.sendOne(item)));
          } else batch.forEach((item) => item.reject(clientError));
        }
      }
    } finally {
      this.inFlight--;
    }
    // Not at once: the callers just answered submit again a few microtask turns later, and a
    // flush on the next macrotask takes their jobs too, where one now would leave them for
    // the call after. With one call in flight per partition, a closed loop of callers then
    // split into calls half as full (bench/diag/engines-rate.mjs, 2 engines capped at 1/8
    // core: SubmitBatch calls per job 0.037 -> 0.028, commits 0.067 -> 0.049).
    setImmediate(() => void this.flush());
  }

  private async sendOne(item: Pending): Promise<void> {
    try {
      item.resolve(await submitCall(this.link, item.spec));
    } catch (error) {
      item.reject(toClientError(error));
    }
  }
}
