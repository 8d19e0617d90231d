import type { Engine } from "../engine/engine.js";
import { WorqError } from "../model/errors.js";
import type { PendingCallback } from "../engine/store.js";
import { envelopeOf } from "../formats/envelope.js";
import { batchJsonOf } from "../formats/batch-json.js";
import { batchOfWebhookId } from "../model/batch.js";
import type { Logger } from "../log.js";
import { SIGNATURE_HEADER, webhookSignature } from "./webhook-signature.js";

export interface WebhookSenderOptions {
  /** Attempts before giving up on one webhook. */
  maxAttempts?: number;
  /** Delay before the second attempt; doubles after each, capped at 2 minutes. */
  initialDelayMs?: number;
  /** Per-request timeout. */
  timeoutMs?: number;
  /** Webhooks in flight at once, all targets together. */
  concurrency?: number;
  /** Webhooks in flight at once to one origin, so a slow receiver cannot take every slot. */
  concurrencyPerTarget?: number;
  /** Signs each request (the Worq-Signature header) when set; unsigned without. */
  secret?: Buffer;
  isAllowed: (url: URL) => boolean;
}

interface Delivery {
  callback: PendingCallback;
  attempt: number;
}

/**
 * Delivers `callback_url` webhooks: POSTs the finished job as a job envelope
 * (docs/job-formats.md, docs/webhooks.md), retrying with exponential backoff (1 s, 2 s,
 * 4 s … for ~10 attempts), off the job path so no queue waits on a slow receiver. A webhook is forgotten (in the store) once a 2xx arrives or it
 * is given up; one pending at a crash is sent again after the restart (at least once).
 * Deliveries wait in one queue per origin, served in turn, so a slow receiver holds at most
 * `concurrencyPerTarget` of the `concurrency` slots and the others' webhooks go on.
 */
export class WebhookSender {
  /** Waiting deliveries by origin; an origin is moved to the end when it is served. */
  private readonly waiting = new Map<string, Delivery[]>();
  private readonly inFlightByOrigin = new Map<string, number>();
  private inFlight = 0;
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly maxAttempts: number;
  private readonly initialDelayMs: number;
  private readonly timeoutMs: number;
  private readonly concurrency: number;
  private readonly concurrencyPerTarget: number;

  constructor(
    private readonly engine: Engine,
    private readonly log: Logger,
    private readonly options: WebhookSenderOptions,
  ) {
    this.maxAttempts = options.maxAttempts ?? 10;
    this.initialDelayMs = options.initialDelayMs ?? 1_000;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.concurrency = options.concurrency ?? 8;
    this.concurrencyPerTarget = options.concurrencyPerTarget ?? 4;
    engine.onCallbackDue((callback) => this.enqueue(callback, 1));
  }

  stop(): void {
    this.stopped = true;
    this.timers.forEach((timer) => clearTimeout(timer));
  }

  private enqueue(callback: PendingCallback, attempt: number): void {
    const origin = originOf(callback.url);
    const queue = this.waiting.get(origin);
    if (queue) queue.push({ callback, attempt });
    else this.waiting.set(origin, [{ callback, attempt }]);
    this.drain();
  }

  private drain(): void {
    while (!this.stopped && this.inFlight < this.concurrency) {
      const next = this.nextDelivery();
      if (!next) return;
      const { origin, delivery } = next;
      this.inFlight++;
      this.inFlightByOrigin.set(origin, (this.inFlightByOrigin.get(origin) ?? 0) + 1);
      const { jid } = delivery.callback;
      // A store error while settling must not end the process: the webhook stays owed and
      // is sent again after the next restart.
      void this.send(delivery.callback, delivery.attempt)
        .catch((error: unknown) => this.log.error("webhook delivery failed", { jid, origin, error: redactUserinfo(String(error)) }))
        .finally(() => {
          this.inFlight--;
          const left = this.inFlightByOrigin.get(origin)! - 1;
          if (left === 0) this.inFlightByOrigin.delete(origin);
          else this.inFlightByOrigin.set(origin, left);
          this.drain();
        });
    }
  }

  /** The first waiting delivery of the first origin below its cap; that origin goes to the back of the turn. */
  private nextDelivery(): { origin: string; delivery: Delivery } | undefined {
    for (const [origin, queue] of this.waiting) {
      if ((this.inFlightByOrigin.get(origin) ?? 0) >= this.concurrencyPerTarget) continue;
      const delivery = queue.shift()!;
      this.waiting.delete(origin);
      if (queue.length > 0) this.waiting.set(origin, queue);
      return { origin, delivery };
    }
    return undefined;
  }

  private async send(callback: PendingCallback, attempt: number): Promise<void> {
    let url: URL;
    try {
      url = new URL(callback.url);
    } catch {
      this.log.warn("webhook URL does not parse; dropped", { jid: callback.jid });
      await this.engine.settleCallback(callback.jid);
      return;
    }
    if (url.username !== "" || url.password !== "") {
      // Submit refuses such a URL; a job stored by an earlier version may carry one, which
      // fetch() would refuse on every attempt (and its message would hold the password).
      this.log.warn("webhook URL carries credentials; dropped", { jid: callback.jid, origin: url.origin });
      await this.engine.settleCallback(callback.jid);
      return;
    }
    if (!this.options.isAllowed(url)) {
      // The allowlist shrank since the job was submitted: never call a target no longer allowed.
      this.log.warn("webhook target no longer allowed; dropped", { jid: callback.jid, origin: url.origin });
      await this.engine.settleCallback(callback.jid);
      return;
    }
    let body: string;
    const batchId = batchOfWebhookId(callback.jid);
    try {
      // A batch's webhook POSTs the batch (docs/batches.md); a job's the job's envelope.
      body = JSON.stringify(
        batchId ? batchJsonOf(await this.engine.getBatch(batchId, 0)) : envelopeOf(await this.engine.getJob(callback.jid)),
      );
    } catch (error) {
      if (error instanceof WorqError && error.code === "WORQ_NOT_FOUND") {
        await this.engine.settleCallback(callback.jid); // deleted meanwhile: nothing to report
        return;
      }
      throw error;
    }
    let problem: string;
    try {
      const response = await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "user-agent": "worq-webhook",
          ...(batchId ? { "worq-batch-id": batchId } : { "worq-jid": callback.jid }),
          ...(this.options.secret && { [SIGNATURE_HEADER]: webhookSignature(this.options.secret, body, Math.floor(Date.now() / 1000)) }),
        },
        body,
        redirect: "manual", // a redirect could lead anywhere, past the allowlist
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      await response.body?.cancel();
      if (response.ok) {
        await this.engine.settleCallback(callback.jid);
        return;
      }
      problem = `HTTP ${response.status}`;
    } catch (error) {
      problem = redactUserinfo((error as Error).message);
    }
    if (attempt >= this.maxAttempts) {
      this.log.error("webhook given up", { jid: callback.jid, origin: url.origin, attempts: attempt, problem });
      await this.engine.settleCallback(callback.jid);
      return;
    }
    const delayMs = Math.min(120_000, this.initialDelayMs * 2 ** (attempt - 1));
    this.log.warn("webhook failed; will retry", { jid: callback.jid, origin: url.origin, attempt, delayMs, problem });
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.enqueue(callback, attempt + 1);
    }, delayMs);
    this.timers.add(timer);
  }
}

/** An allowlist check from `--callback-allow` origins ("https://hooks.example.com", "http://127.0.0.1:9000"). */
export function originAllowlist(origins: readonly string[]): (url: URL) => boolean {
  const allowed = new Set(origins.map((origin) => new URL(origin).origin));
  return (url) => allowed.has(url.origin);
}

/** The origin a delivery counts against for the per-target cap; "" for a URL that does not parse (send() drops it). */
function originOf(text: string): string {
  try {
    return new URL(text).origin;
  } catch {
    return "";
  }
}

/** `text` with the user:password@ part of any URL in it masked, so no log line carries a credential. */
export function redactUserinfo(text: string): string {
  return text.replace(/(\/\/)[^/?#@\s]*@/g, "$1***@");
}
