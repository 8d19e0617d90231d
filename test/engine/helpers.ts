/**
 * Shared fixtures of the engine tests: a collecting LeaseSink, a store whose commits can be
 * made to fail, a microtask/IO flush, and small assertion helpers. Each test file still
 * builds its own `{ clock, store, engine }` in a local `setup()`.
 */
import { expect } from "vitest";
import { ManualClock } from "../../src/engine/clock.js";
import { Engine, type EngineOptions, type LeaseGrant, type LeaseSession, type LeaseSink } from "../../src/engine/engine.js";
import { WorqError, type WorqErrorCode } from "../../src/model/errors.js";
import type { SubmitInput } from "../../src/model/job.js";
import type { FailureReport } from "../../src/engine/state-machine.js";
import type { StoreWrite } from "../../src/engine/store.js";
import { MemoryStore, createMemoryData, type MemoryData } from "../../src/storage/memory/memory-store.js";

/**
 * The engine's unpackedMetaLimit in these tests: the default, or 0 (every waiting job's meta
 * held packed) when packed-metas.test.ts runs the engine suites again.
 */
export function unpackedMetaLimitUnderTest(): number | undefined {
  return (globalThis as { worqUnpackedMetaLimit?: number }).worqUnpackedMetaLimit;
}

/** The engines' ready window (src/engine/ready-queue.ts) when a suite runs with a small one (small-ready-window.test.ts). */
export function readyWindowUnderTest(): number | undefined {
  return (globalThis as { worqReadyWindow?: number }).worqReadyWindow;
}

/** 2026-01-01T00:00:00Z, the ManualClock's default start. */
export const T0 = Date.UTC(2026, 0, 1);

/**
 * Lets every pending store commit and lease delivery run. Deliveries happen after the commit
 * resolves, then after the bodies are read, so a few event-loop turns are enough; no wall-clock sleep.
 */
export async function flush(turns = 5): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** A LeaseSink that records everything pushed to it. */
export class CollectingSink implements LeaseSink {
  readonly grants: LeaseGrant[] = [];
  readonly batches: LeaseGrant[][] = [];
  readonly controls: { action: string; reason: string }[] = [];
  readonly revoked: { jid: string; leaseId: string; reason: string }[] = [];
  revoke(jid: string, leaseId: string, reason: string): void {
    this.revoked.push({ jid, leaseId, reason });
  }
  deliver(grants: LeaseGrant[]): void {
    this.batches.push(grants);
    this.grants.push(...grants);
  }
  control(action: "RECONNECT" | "QUIET" | "TERMINATE", reason: string): void {
    this.controls.push({ action, reason });
  }
  /** Jids delivered so far, in delivery order. */
  get jids(): string[] {
    return this.grants.map((grant) => grant.meta.jid);
  }
  /** The grant delivered for `jid` (the latest one, if it was delivered more than once). */
  grantOf(jid: string): LeaseGrant {
    const grant = [...this.grants].reverse().find((g) => g.meta.jid === jid);
    if (!grant) throw new Error(`job ${jid} was not delivered`);
    return grant;
  }
}

/** A MemoryStore whose commits reject with WORQ_UNAVAILABLE once `failing` is set. */
export class FlakyStore extends MemoryStore {
  failing = false;
  commits = 0;
  override commit(writes: StoreWrite[]): Promise<void> {
    this.commits++;
    if (this.failing) return Promise.reject(new WorqError("WORQ_UNAVAILABLE", "disk on fire"));
    return super.commit(writes);
  }
}

/**
 * A MemoryStore whose calls can be stalled until `release()`, as a slow disk's would: commits
 * (reads see only what passed), meta reads, and the next `stalledBodyReads` body reads (later
 * ones pass, so reads finish out of order).
 */
export class GatedStore extends MemoryStore {
  stallCommits = false;
  stallReads = false;
  stalledBodyReads = 0;
  /** Ready pages (page-ins, listings, purges of cold jobs) to stall, the next ones read. */
  stalledReadyPages = 0;
  private waiting: (() => void)[] = [];
  override commit(writes: StoreWrite[]): Promise<void> {
    return this.stallCommits ? this.gate().then(() => super.commit(writes)) : super.commit(writes);
  }
  override getMeta(jid: string): ReturnType<MemoryStore["getMeta"]> {
    return this.stallReads ? this.gate().then(() => super.getMeta(jid)) : super.getMeta(jid);
  }
  override getBodies(jids: readonly string[]): ReturnType<MemoryStore["getBodies"]> {
    if (this.stalledBodyReads === 0) return super.getBodies(jids);
    this.stalledBodyReads--;
    return this.gate().then(() => super.getBodies(jids));
  }
  override readyPage(...args: Parameters<MemoryStore["readyPage"]>): ReturnType<MemoryStore["readyPage"]> {
    if (this.stalledReadyPages === 0) return super.readyPage(...args);
    this.stalledReadyPages--;
    return this.gate().then(() => super.readyPage(...args));
  }
  release(): void {
    this.stallCommits = this.stallReads = false;
    this.stalledBodyReads = this.stalledReadyPages = 0;
    this.waiting.splice(0).forEach((go) => go());
  }
  private gate(): Promise<void> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }
}

export interface Fixture {
  clock: ManualClock;
  store: MemoryStore;
  engine: Engine;
  data: MemoryData;
}

/** Builds and opens an engine over `data` (a fresh MemoryData unless given: pass one to simulate a restart). */
export async function openEngine(options: Partial<EngineOptions> & { data?: MemoryData; clock?: ManualClock } = {}): Promise<Fixture> {
  const data = options.data ?? createMemoryData();
  const clock = options.clock ?? new ManualClock(T0);
  const store = (options.store as MemoryStore | undefined) ?? new MemoryStore(data);
  const engine = new Engine({
    random: () => 0.5,
    unpackedMetaLimit: unpackedMetaLimitUnderTest(),
    readyWindow: readyWindowUnderTest(),
    ...options,
    store,
    clock,
  });
  await engine.open();
  return { clock, store, engine, data };
}

/** The field prefix the transport uses for a single Submit. */
export const single = (): string => "job";
/** The field prefix the transport uses for a batch Submit. */
export const batch = (i: number): string => `jobs[${i}]`;

/** Submits one job and returns its jid. */
export async function submitOne(engine: Engine, input: SubmitInput): Promise<string> {
  const [result] = await engine.submit([input], single);
  return result!.jid;
}

/** Submits jobs one by one (distinct submits, so FIFO order is the call order). */
export async function submitEach(engine: Engine, inputs: SubmitInput[]): Promise<string[]> {
  const jids: string[] = [];
  for (const input of inputs) jids.push(await submitOne(engine, input));
  return jids;
}

/** Acks each job `sink` is given until nothing more comes (20 quiet rounds of `settle`). */
export async function ackAsDelivered(engine: Engine, sink: CollectingSink, settle: () => Promise<void> = () => flush()): Promise<void> {
  let acked = 0;
  for (let idle = 0; idle < 20;) {
    await settle();
    const delivered = sink.grants.slice(acked);
    if (delivered.length === 0) {
      idle++;
      continue;
    }
    idle = 0;
    await engine.ackAll(delivered.map((grant) => ({ jid: grant.meta.jid, leaseId: grant.meta.lease!.leaseId, result: new Uint8Array() })));
    acked += delivered.length;
  }
}

/** Opens a lease session with a collecting sink and lets the first deliveries arrive. */
export async function lease(
  engine: Engine,
  queues: string[],
  credits: number,
  workerId = "worker-1",
): Promise<{ session: LeaseSession; sink: CollectingSink }> {
  const sink = new CollectingSink();
  const session = engine.openLease({ queues, workerId, credits }, sink);
  await flush();
  return { session, sink };
}

export function report(overrides: Partial<FailureReport> = {}): FailureReport {
  return { message: "boom", errtype: "RuntimeError", backtrace: [], category: "TEMPORARY", ...overrides };
}

/** Asserts that `action` throws (or rejects with) a WorqError with `code` and, when given, `field`. */
export async function expectWorqError(action: () => unknown, code: WorqErrorCode, field?: string): Promise<WorqError> {
  let caught: unknown;
  try {
    await action();
  } catch (error) {
    caught = error;
  }
  expect(caught, `expected ${code}${field ? ` (${field})` : ""}, nothing was thrown`).toBeInstanceOf(WorqError);
  const error = caught as WorqError;
  expect(error.code, error.message).toBe(code);
  if (field !== undefined) expect(error.field, error.message).toBe(field);
  return error;
}

/** Synchronous variant, for functions that throw rather than reject. */
export function expectWorqErrorSync(action: () => unknown, code: WorqErrorCode, field?: string): WorqError {
  let caught: unknown;
  try {
    action();
  } catch (error) {
    caught = error;
  }
  expect(caught, `expected ${code}${field ? ` (${field})` : ""}, nothing was thrown`).toBeInstanceOf(WorqError);
  const error = caught as WorqError;
  expect(error.code).toBe(code);
  if (field !== undefined) expect(error.field).toBe(field);
  return error;
}

export const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
export const text = (data: Uint8Array | undefined): string | undefined => data && new TextDecoder().decode(data);
