import { open, unlink } from "node:fs/promises";
import { join } from "node:path";
import { unfinishedJobs, type Engine } from "./engine/engine.js";
import type { Logger } from "./log.js";

/** How often a degraded server tries its storage again. */
const STORAGE_PROBE_INTERVAL_MS = 1_000;
const PROBE_FILE = "WORQ_WRITE_PROBE";

export interface StoreRecoveryOptions {
  /** A directory where a synced file write tells whether storage works; without it, reopening is the probe. */
  probeDir?: string;
  log: Logger;
  /** Closes the engine whose write failed (and its store, releasing the data dir's lock). */
  closeFailed(): Promise<void>;
  /** Opens a new store and engine on the data dir, as at start-up; rejects while storage still fails. */
  reopen(): Promise<Engine>;
  /** The engine loaded after recovery takes over. */
  recovered(engine: Engine): void;
  /** Hears of entering (true) and leaving (false) the degraded state: health checks. */
  onDegraded(degraded: boolean): void;
  probeIntervalMs?: number;
}

/**
 * What happens after a storage write failed (disk full, read-only, I/O error). The failed
 * engine has answered every waiting caller with UNAVAILABLE and refuses new work; its memory
 * may be ahead of the disk, so it is never written through again. Instead, every probe
 * interval, a small synced file write tests the data dir (a store without one, PostgreSQL, is
 * probed by reopening it); once one succeeds, the failed engine
 * is closed and a new one is loaded from the store exactly as at start-up (leases capped at
 * the orphan grace, workers told to reconnect), and takes over. Nothing is claimed stored
 * that was not: the disk is the only source the new engine trusts.
 */
export class StoreRecovery {
  private failure: { cause: string; sinceMs: number } | undefined;
  private failedClosed = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly probeIntervalMs: number;

  constructor(private readonly options: StoreRecoveryOptions) {
    this.probeIntervalMs = options.probeIntervalMs ?? STORAGE_PROBE_INTERVAL_MS;
  }

  /** True between a failed write and the recovered engine taking over. */
  get degraded(): boolean {
    return this.failure !== undefined;
  }

  /** The engine's onFatal: enters the degraded state (once) and starts probing. */
  storeFailed(error: unknown): void {
    if (this.failure !== undefined || this.stopped) return;
    const cause = error instanceof Error ? error.message : String(error);
    this.failure = { cause, sinceMs: Date.now() };
    this.failedClosed = false;
    this.options.log.error("storage failed; refusing work until a probe write succeeds", {
      error: cause,
      probeEveryMs: this.probeIntervalMs,
    });
    this.options.onDegraded(true);
    this.schedule();
  }

  /** Stops probing (server shutdown). */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.probe(), this.probeIntervalMs);
  }

  private async probe(): Promise<void> {
    const failure = this.failure;
    if (failure === undefined || this.stopped) return;
    const probeError = this.options.probeDir === undefined ? undefined : await probeWrite(this.options.probeDir);
    if (probeError !== undefined) {
      this.options.log.warn("storage still failing", { error: probeError });
      this.schedule();
      return;
    }
    if (!this.failedClosed) {
      await this.options
        .closeFailed()
        .catch((error: unknown) => this.options.log.warn("closing the failed store", { error: String(error) }));
      this.failedClosed = true;
    }
    let engine: Engine;
    try {
      engine = await this.options.reopen();
    } catch (error) {
      this.options.log.warn("storage writable but the store did not reopen yet", { error: String(error) });
      this.schedule();
      return;
    }
    if (this.stopped) {
      await engine.close().catch(() => {});
      return;
    }
    this.failure = undefined;
    this.options.recovered(engine);
    this.options.onDegraded(false);
    this.options.log.info("storage recovered; serving again", {
      degradedMs: Date.now() - failure.sinceMs,
      liveJobs: unfinishedJobs(engine.info()),
    });
  }
}

/** Writes, fdatasyncs and removes a small file in `dir`; the error message, or undefined when it worked. */
async function probeWrite(dir: string): Promise<string | undefined> {
  const path = join(dir, PROBE_FILE);
  try {
    const file = await open(path, "w");
    try {
      await file.write(new Uint8Array(4096));
      await file.datasync();
    } finally {
      await file.close();
    }
    await unlink(path);
    return undefined;
  } catch (error) {
    await unlink(path).catch(() => {});
    return (error as Error).message;
  }
}
