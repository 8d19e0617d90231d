import type { Engine } from "../engine/engine.js";
import { WorqError } from "../engine/errors.js";
import type { PendingCallback } from "../engine/store.js";
import { envelopeOf } from "../formats/envelope.js";
import type { Logger } from "../log.js";

export interface WebhookSenderOptions {
  /** Attempts before giving up on one webhook. */
  maxAttempts?: number;
  /** Delay before the second attempt; doubles after each, capped at 2 minutes. */
  initialDelayMs?: number;
  /** Per-request timeout. */
  timeoutMs?: number;
  /** Webhooks in flight at once. */
  concurrency?: number;
  isAllowed: (url: URL) => boolean;
}

/**
 * Delivers `callback_url` webhooks: POSTs the finished job as a seed 002 envelope, retrying
 * with exponential backoff (1 s, 2 s, 4 s … for ~10 attempts), off the job path so no queue
 * waits on a slow receiver. A webhook is forgotten (in the store) once a 2xx arrives or it
 * is given up; one pending at a crash is sent again after the restart (at least once).
 */
export class WebhookSender {
  private readonly queue: { callback: PendingCallback; attempt: number }[] = [];
  private inFlight = 0;
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly maxAttempts: number;
  private readonly initialDelayMs: number;
  private readonly timeoutMs: number;
  private readonly concurrency: number;

  constructor(
    private readonly engine: Engine,
    private readonly log: Logger,
    private readonly options: WebhookSenderOptions,
  ) {
    this.maxAttempts = options.maxAttempts ?? 10;
    this.initialDelayMs = options.initialDelayMs ?? 1_000;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.concurrency = options.concurrency ?? 8;
    engine.onCallbackDue((callback) => this.enqueue(callback, 1));
  }

  stop(): void {
    this.stopped = true;
    this.timers.forEach((timer) => clearTimeout(timer));
  }

  private enqueue(callback: PendingCallback, attempt: number): void {
    this.queue.push({ callback, attempt });
    this.drain();
  }

  private drain(): void {
    while (!this.stopped && this.inFlight < this.concurrency && this.queue.length > 0) {
      const next = this.queue.shift()!;
      this.inFlight++;
      void this.send(next.callback, next.attempt).finally(() => {
        this.inFlight--;
        this.drain();
      });
    }
  }

  private async send(callback: PendingCallback, attempt: number): Promise<void> {
    const url = new URL(callback.url);
    if (!this.options.isAllowed(url)) {
      // The allowlist shrank since the job was submitted: never call a target no longer allowed.
      this.log.warn("webhook target no longer allowed; dropped", { jid: callback.jid, origin: url.origin });
      await this.engine.settleCallback(callback.jid);
      return;
    }
    let body: string;
    try {
      body = JSON.stringify(envelopeOf(await this.engine.getJob(callback.jid)));
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
        headers: { "content-type": "application/json", "user-agent": "worq-webhook", "worq-jid": callback.jid },
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
      problem = (error as Error).message;
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
