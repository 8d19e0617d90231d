import { WireType } from "@bufbuild/protobuf/wire";
import { encoded } from "./wire/wire-writer.js";
import { Code } from "@connectrpc/connect";
import { readString, readTag, skipField, WireReader } from "./wire/json-value.js";
import { toClientError } from "./errors.js";
import type { GrpcLink } from "./grpc-link.js";

/**
 * One SubmitBatch call with encoded JobSpecs (encodeJobSpec); resolves with the jids in
 * order. The request is SubmitBatchRequest.jobs (field 1) and the answer is read for
 * SubmitBatchResponse.jobs[].jid (field 1 of field 1) only, without building messages.
 */
export async function submitBatchCall(link: GrpcLink, specs: readonly Uint8Array[]): Promise<string[]> {
  const request = encoded((w) => {
    for (const spec of specs) w.tag(1, WireType.LengthDelimited).bytes(spec);
  });
  const r = new WireReader(await link.unary("/worq.v1.ProducerService/SubmitBatch", request));
  const jids: string[] = [];
  while (r.pos < r.len) {
    const tag = readTag(r);
    if (tag === ((1 << 3) | WireType.LengthDelimited)) jids.push(readJid(r, r.uint32() + r.pos));
    else skipField(r, tag & 7, tag >>> 3);
  }
  return jids;
}

/** One Submit call (SubmitRequest.job, field 1); resolves with SubmitResponse.jid. */
async function submitCall(link: GrpcLink, spec: Uint8Array): Promise<string> {
  const request = encoded((w) => w.tag(1, WireType.LengthDelimited).bytes(spec));
  const r = new WireReader(await link.unary("/worq.v1.ProducerService/Submit", request));
  return readJid(r, r.len);
}

/** SubmitResponse.jid (field 1) of the message occupying r.pos..end. */
function readJid(r: WireReader, end: number): string {
  let jid = "";
  while (r.pos < end) {
    const tag = readTag(r);
    if (tag === ((1 << 3) | WireType.LengthDelimited)) jid = readString(r);
    else skipField(r, tag & 7, tag >>> 3);
  }
  return jid;
}

interface Pending {
  spec: Uint8Array;
  resolve: (jid: string) => void;
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

  submit(spec: Uint8Array): Promise<string> {
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
          const jids = await submitBatchCall(
            this.link,
            batch.map((item) => item.spec),
          );
          batch.forEach((item, i) => item.resolve(jids[i]!));
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
    if (this.queue.length > 0) void this.flush();
  }

  private async sendOne(item: Pending): Promise<void> {
    try {
      item.resolve(await submitCall(this.link, item.spec));
    } catch (error) {
      item.reject(toClientError(error));
    }
  }
}
