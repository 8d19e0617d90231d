/**
 * Model-based property tests of the Engine: random sequences of submits (single and batch),
 * Lease sessions opening and closing (1-3 at once, credits 1-3, three worker ids so that a
 * reconnecting worker adopts its slots), Ack/Fail/Renew with a live or a stale lease, Cancel,
 * clock advances followed by tick(), and restarts (graceful, or kill -9) over the same
 * MemoryData. After every step (and a flush) the engine is checked against a small model:
 *
 * - every store write is one allowed transition (docs/state-machine.md) of the
 *   job as last written, with a cause in that step (report, lapse/due in a tick, lease by the
 *   pump, cancel); terminal states never change; attempt grows by one exactly on a lease;
 * - reports: a live ack/fail/renew gives the documented outcome (state, retry time, lease
 *   expiry); a RATE_LIMITED fail gives the job back DELAYED for its retry_after with its
 *   attempt, fails and failure as before (not counted as failed); a stale one throws
 *   WORQ_LEASE_NOT_HELD and changes nothing;
 * - leases: RUNNING ⇔ a lease, and it is the latest lease delivered for the job; each lease
 *   is delivered exactly once, to an open session on the job's queue;
 * - nothing lost: getJob, the store and the last write agree for every submitted job;
 *   liveJobs = unfinished jobs; counters (submitted, processed, failed) match, durably;
 * - timers: nextWakeMs() is never after a pending due time or lease expiry; after tick()
 *   nothing due is left;
 * - credits: a session never holds more delivered-but-unreported jobs than its credits (a
 *   lapsed lease counts until reported); it is pushed no more than its credits counting
 *   adopted slots; and it never idles with a free slot while one of its queues has a ready job;
 * - close caps the stream's leases at now + orphan grace; a restart keeps every job's state,
 *   caps leases at min(stored expiry, restart + grace), keeps the counters;
 * - finally, with every session closed and one draining worker acking all it gets while time
 *   moves on, every job ends terminal.
 *
 * Every store commit is recorded (RecordingStore), so each single transition is checked, not
 * only the states seen between steps (one tick can move a job DELAYED → SCHEDULED → RUNNING).
 *
 * WORQ_PROPERTY_RUNS=<n> raises the number of runs for a soak (default 200); WORQ_PROPERTY_SEED
 * and WORQ_PROPERTY_PATH replay a failure that fast-check reported.
 *
 * Found by this test and fixed: a slot whose lease lapsed (or was revoked) while its stream
 * was open used to stay taken after the stream ended and be adopted by the next stream of the
 * same worker id, which (as a new process) never reported it: submit(reserve 1 s) → open(w0,
 * credits 1) → advance 1 s + tick → close → open(w0, credits 1) left the job SCHEDULED forever.
 * Now such a slot is freed when its stream ends, and the model says so in close().
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/engine/clock.js";
import { Engine, type LeaseSession } from "../../src/engine/engine.js";
import { WorqError } from "../../src/model/errors.js";
import { isTerminal, type FailureCategory, type JobMeta, type JobState, type SubmitInput } from "../../src/model/job.js";
import type { StoreWrite } from "../../src/engine/store.js";
import { MemoryStore, createMemoryData, type MemoryData } from "../../src/storage/memory/memory-store.js";
import { CollectingSink, T0, batch, flush, report, single, readyWindowUnderTest, unpackedMetaLimitUnderTest } from "./helpers.js";

const RUNS = Number(process.env.WORQ_PROPERTY_RUNS ?? 200);
const SEED = process.env.WORQ_PROPERTY_SEED === undefined ? undefined : Number(process.env.WORQ_PROPERTY_SEED);
const PATH = process.env.WORQ_PROPERTY_PATH;
const ORPHAN_GRACE_MS = 10_000;
const QUEUES = ["a", "b"] as const;
const WORKERS = ["w0", "w1", "w2"] as const;
const MAX_SESSIONS = 3;

/**
 * Transitions a job may take (docs/state-machine.md), including renew, lapse (to
 * RETRYING, with backoff), CANCELLED and ttl eviction. Terminal states have none.
 */
const ALLOWED: Record<JobState, readonly JobState[]> = {
  PENDING: ["SCHEDULED", "DELAYED", "CANCELLED", "DEAD_LETTER"],
  DELAYED: ["SCHEDULED", "CANCELLED", "DEAD_LETTER"],
  SCHEDULED: ["RUNNING", "CANCELLED", "DEAD_LETTER"],
  // RUNNING → SCHEDULED: a grant that its stream closed before receiving is given back.
  // RUNNING → DELAYED: a handler's RATE_LIMITED answer gives the job back for its retry_after.
  RUNNING: ["RUNNING", "SCHEDULED", "DELAYED", "COMPLETED", "RETRYING", "FAILED", "CANCELLED", "DEAD_LETTER"],
  RETRYING: ["SCHEDULED", "DEAD_LETTER", "CANCELLED"],
  COMPLETED: [],
  FAILED: [],
  DEAD_LETTER: [],
  CANCELLED: [],
};

// ---------------------------------------------------------------------------------------
// Actions

interface SubmitAction {
  k: "submit";
  /** Jobs in the one submit (a batch when more than one), all alike. */
  count: number;
  queue: (typeof QUEUES)[number];
  priority: 0 | 1 | 2 | 3 | 4;
  delayMs: number | null;
  /** 0: unlimited. */
  maxAttempts: number;
  maxFails: number | null;
  /** RetryPolicy.retry_timeout / retry_system; null leaves them unset (retried). */
  retryTimeout: boolean | null;
  retrySystem: boolean | null;
  reserveForMs: number;
  executionTimeoutMs: number | null;
}
interface OpenAction {
  k: "open";
  worker: number;
  queues: string[];
  credits: number;
}
interface CloseAction {
  k: "close";
  pick: number;
}
interface ReportAction {
  k: "report";
  op: "ack" | "fail" | "renew";
  stale: boolean;
  pick: number;
  category: ReportCategory;
  retryAfterMs: number | null;
}
/** What a Fail may carry: a failure's category, or RATE_LIMITED (the job given back, not a failure). */
type ReportCategory = FailureCategory | "RATE_LIMITED";
interface AdvanceAction {
  k: "advance";
  ms: number;
}
interface RestartAction {
  k: "restart";
  /** false: the old engine is abandoned without close() (kill -9 after its writes landed). */
  graceful: boolean;
}
/** Not in the brief's list, but the state machine's other way out of every unfinished state. */
interface CancelAction {
  k: "cancel";
  pick: number;
}
/** ConfigureQueue: whether the queue's TIMEOUT / SYSTEM failures are retried (null: left as it is). */
interface ConfigureAction {
  k: "configure";
  queue: (typeof QUEUES)[number];
  retryTimeout: boolean | null;
  retrySystem: boolean | null;
}
type Action = SubmitAction | OpenAction | CloseAction | ReportAction | AdvanceAction | RestartAction | CancelAction | ConfigureAction;

const steps = (min: number, max: number, unit: number) => fc.integer({ min, max }).map((n) => n * unit);
/** `arb`, or null with weight `nulls` against `values` (shrinks towards null). */
const maybe = <T>(arb: fc.Arbitrary<T>, nulls: number, values: number) =>
  fc.oneof({ arbitrary: fc.constant(null), weight: nulls }, { arbitrary: arb, weight: values });

const submitArb: fc.Arbitrary<Action> = fc.record({
  k: fc.constant("submit" as const),
  count: fc.oneof({ arbitrary: fc.constant(1), weight: 4 }, { arbitrary: fc.integer({ min: 2, max: 3 }), weight: 1 }),
  queue: fc.constantFrom(...QUEUES),
  priority: fc.constantFrom(0 as const, 1 as const, 2 as const, 3 as const, 4 as const),
  delayMs: maybe(steps(1, 10, 500), 1, 1),
  maxAttempts: fc.oneof({ arbitrary: fc.integer({ min: 1, max: 3 }), weight: 4 }, { arbitrary: fc.constant(0), weight: 1 }),
  maxFails: maybe(fc.integer({ min: 1, max: 2 }), 2, 1),
  retryTimeout: maybe(fc.boolean(), 3, 1),
  retrySystem: maybe(fc.boolean(), 3, 1),
  // Mostly short leases that lapse during a run; some longer than the orphan grace.
  reserveForMs: fc.oneof({ arbitrary: steps(2, 10, 500), weight: 3 }, { arbitrary: steps(11, 60, 1_000), weight: 2 }),
  executionTimeoutMs: maybe(steps(2, 16, 500), 2, 1),
});
const openArb: fc.Arbitrary<Action> = fc.record({
  k: fc.constant("open" as const),
  worker: fc.integer({ min: 0, max: WORKERS.length - 1 }),
  queues: fc.constantFrom<string[]>(["a"], ["b"], ["a", "b"], ["b", "a"]),
  credits: fc.integer({ min: 1, max: 3 }),
});
const closeArb: fc.Arbitrary<Action> = fc.record({ k: fc.constant("close" as const), pick: fc.nat(8) });
const reportArb: fc.Arbitrary<Action> = fc.record({
  k: fc.constant("report" as const),
  op: fc.constantFrom("ack" as const, "fail" as const, "renew" as const),
  stale: fc.constantFrom(false, false, true),
  pick: fc.nat(64),
  category: fc.constantFrom<ReportCategory>("TEMPORARY", "TEMPORARY", "PERMANENT", "CANCELLED", "TIMEOUT", "SYSTEM", "RATE_LIMITED"),
  retryAfterMs: maybe(steps(0, 6, 500), 1, 1),
});
const advanceArb: fc.Arbitrary<Action> = fc.record({ k: fc.constant("advance" as const), ms: steps(0, 12, 250) });
const restartArb: fc.Arbitrary<Action> = fc.record({ k: fc.constant("restart" as const), graceful: fc.boolean() });
const cancelArb: fc.Arbitrary<Action> = fc.record({ k: fc.constant("cancel" as const), pick: fc.nat(64) });
const configureArb: fc.Arbitrary<Action> = fc.record({
  k: fc.constant("configure" as const),
  queue: fc.constantFrom(...QUEUES),
  retryTimeout: maybe(fc.boolean(), 1, 2),
  retrySystem: maybe(fc.boolean(), 1, 2),
});

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { arbitrary: submitArb, weight: 4 },
  { arbitrary: openArb, weight: 3 },
  { arbitrary: closeArb, weight: 2 },
  { arbitrary: reportArb, weight: 8 },
  { arbitrary: advanceArb, weight: 4 },
  { arbitrary: restartArb, weight: 2 },
  { arbitrary: cancelArb, weight: 1 },
  { arbitrary: configureArb, weight: 1 },
);

// ---------------------------------------------------------------------------------------
// The simulation and its model

/** A MemoryStore that records the writes of every commit, in call order, into a shared log. */
class RecordingStore extends MemoryStore {
  constructor(
    data: MemoryData,
    private readonly log: StoreWrite[][],
  ) {
    super(data);
  }
  override commit(writes: StoreWrite[]): Promise<void> {
    this.log.push(structuredClone(writes));
    return super.commit(writes);
  }
}

class PropertyViolation extends Error {}

/** What the runs exercised, so a generator change cannot quietly make the properties vacuous. */
const COVERAGE = new Map<string, number>();
function cover(what: string): void {
  COVERAGE.set(what, (COVERAGE.get(what) ?? 0) + 1);
}
const MUST_COVER = [
  "DELAYED → SCHEDULED",
  "SCHEDULED → RUNNING",
  "RUNNING → RUNNING",
  "RUNNING → COMPLETED",
  "RUNNING → RETRYING",
  "RUNNING → FAILED",
  "RUNNING → CANCELLED",
  "RUNNING → DEAD_LETTER",
  "RUNNING → DELAYED",
  "rate limited",
  "RETRYING → SCHEDULED",
  "lapse",
  "lapse not retried",
  "configure",
  "execution timeout",
  "stale ack",
  "stale fail",
  "stale renew",
  "slots adopted",
  "lease capped at close",
  "lease capped at restart",
  "restart (close)",
  "restart (kill)",
  "cancel SCHEDULED",
  "cancel DELAYED",
  "cancel RUNNING",
  "cancel (finished)",
];

function check(condition: unknown, message: string): asserts condition {
  if (!condition) throw new PropertyViolation(message);
}

interface JobInfo {
  jid: string;
  input: SubmitAction;
  /** The last meta handed to the store. */
  written: JobMeta;
  /** The last meta getJob returned. */
  observed: JobMeta;
  /** Lease transitions written since `observed`, less the attempts a rate-limited answer gave back. */
  leasesSinceObserved: number;
  /** Lease ids delivered for this job, in order. */
  leases: string[];
}

interface SimSession {
  key: number;
  workerId: string;
  queues: string[];
  credits: number;
  sink: CollectingSink;
  handle: LeaseSession;
  open: boolean;
  /** Grants of `sink` already taken into the model. */
  seen: number;
  deliveredThisStep: boolean;
}

interface Delivery {
  jid: string;
  session: number;
  reported: boolean;
}

/** The engine's worker slot of an unreported lease, as the model expects it (lease-slots.ts). */
interface Slot {
  jid: string;
  workerId: string;
  /** The open session the slot counts against; undefined while orphaned. */
  holder: number | undefined;
  adopted: boolean;
}

type Ctx =
  | { kind: "submit"; jids: string[]; action: SubmitAction }
  | { kind: "tick" | "open" | "close" | "restart" | "noop" }
  | { kind: "configure"; queue: string }
  | { kind: "cancel"; jid: string; consumed: boolean }
  | {
      kind: "report";
      op: "ack" | "fail" | "renew";
      jid: string;
      leaseId: string;
      held: boolean;
      /** A fail's category. */
      category: ReportCategory;
      expected?: { state: JobState; dueAtMs?: number; expiresAtMs?: number };
      consumed: boolean;
    };

const core = (meta: JobMeta) => ({
  state: meta.state,
  attempt: meta.attempt,
  fails: meta.fails,
  leaseId: meta.lease?.leaseId,
  dueAtMs: meta.dueAtMs,
  failure: meta.failure && { category: meta.failure.category, retryCount: meta.failure.retryCount },
});
const show = (value: unknown) => JSON.stringify(value);
function sameCore(actual: JobMeta, expected: JobMeta, what: string): void {
  const a = show(core(actual));
  const e = show(core(expected));
  check(a === e, `${what} of job ${actual.jid}: ${a}, expected ${e}`);
}

function backoffMs(attempt: number): number {
  return Math.min(1_000 * 2 ** (attempt - 1), 3_600_000);
}

/** The queues' settings as the model knows them (ConfigureQueue actions; they must survive restarts). */
type QueueSettings = Map<string, { retryTimeout?: boolean; retrySystem?: boolean }>;

/** Whether a failure of `category` is retried: TIMEOUT and SYSTEM per the job's policy, else its queue's settings, else yes. */
function retried(meta: JobMeta, category: FailureCategory, queues: QueueSettings): boolean {
  if (category === "TIMEOUT") return meta.retry.retryTimeout ?? queues.get(meta.queue)?.retryTimeout ?? true;
  if (category === "SYSTEM") return meta.retry.retrySystem ?? queues.get(meta.queue)?.retrySystem ?? true;
  return true;
}

/** Whether the job's attempts are used up (never with max_attempts 0, unlimited). */
function attemptsUsedUp(meta: JobMeta): boolean {
  return meta.retry.maxAttempts !== 0 && meta.attempt >= meta.retry.maxAttempts;
}

/**
 * Where a fail report takes a RUNNING job (docs/state-machine.md, "How a failure is resolved");
 * RATE_LIMITED is no failure: DELAYED for its retry_after (1 s when unset).
 */
function expectedAfterFail(meta: JobMeta, category: ReportCategory, retryAfterMs: number | null, now: number, queues: QueueSettings) {
  if (category === "RATE_LIMITED") return { state: "DELAYED" as const, dueAtMs: now + (retryAfterMs ?? 1_000) };
  if (category === "PERMANENT") return { state: "FAILED" as const };
  if (category === "CANCELLED") return { state: "CANCELLED" as const };
  if (!retried(meta, category, queues)) return { state: "FAILED" as const };
  const fails = meta.fails + 1;
  const exhausted = attemptsUsedUp(meta) || (meta.retry.maxFails !== null && fails >= meta.retry.maxFails);
  if (exhausted) return { state: "DEAD_LETTER" as const };
  return { state: "RETRYING" as const, dueAtMs: now + (retryAfterMs ?? backoffMs(meta.attempt)) };
}

class Sim {
  readonly clock = new ManualClock(T0);
  readonly data = createMemoryData();
  readonly log: StoreWrite[][] = [];
  private logCursor = 0;
  engine!: Engine;
  readonly jobs = new Map<string, JobInfo>();
  readonly sessions: SimSession[] = [];
  readonly deliveries = new Map<string, Delivery>();
  /** Every delivered lease id, in delivery order. */
  readonly allLeases: string[] = [];
  readonly slots = new Map<string, Slot>();
  private sessionSeq = 0;
  readonly queueSettings: QueueSettings = new Map();
  submits = 0;
  acks = 0;
  fails = 0;
  lapses = 0;

  async start(): Promise<void> {
    this.engine = this.newEngine();
    await this.engine.open();
  }

  private newEngine(): Engine {
    return new Engine({
      store: new RecordingStore(this.data, this.log),
      clock: this.clock,
      random: () => 0.5,
      orphanGraceMs: ORPHAN_GRACE_MS,
      unpackedMetaLimit: unpackedMetaLimitUnderTest(),
      readyWindow: readyWindowUnderTest(),
    });
  }

  async step(action: Action): Promise<void> {
    switch (action.k) {
      case "submit":
        return this.submit(action);
      case "open":
        if (this.openSessions().length >= MAX_SESSIONS) return this.settle({ kind: "noop" });
        await this.open(WORKERS[action.worker]!, action.queues, action.credits);
        return;
      case "close": {
        const open = this.openSessions();
        if (open.length === 0) return this.settle({ kind: "noop" });
        return this.close(open[action.pick % open.length]!);
      }
      case "report": {
        // A live lease if asked and there is one, else a stale one (and the other way round).
        let candidates = this.allLeases.filter((leaseId) => this.isCurrent(leaseId) !== action.stale);
        if (candidates.length === 0) candidates = this.allLeases;
        if (candidates.length === 0) return this.settle({ kind: "noop" });
        const leaseId = candidates[action.pick % candidates.length]!;
        return this.report(leaseId, action.op, action.category, action.retryAfterMs);
      }
      case "advance":
        return this.advance(action.ms);
      case "restart":
        return this.restart(action.graceful);
      case "cancel": {
        const jids = [...this.jobs.keys()];
        if (jids.length === 0) return this.settle({ kind: "noop" });
        return this.cancel(jids[action.pick % jids.length]!);
      }
      case "configure":
        return this.configure(action);
    }
  }

  /** ConfigureQueue: the answer is the whole setting, the given fields changed, the others kept. */
  async configure(action: ConfigureAction): Promise<void> {
    const change = {
      ...(action.retryTimeout !== null ? { retryTimeout: action.retryTimeout } : {}),
      ...(action.retrySystem !== null ? { retrySystem: action.retrySystem } : {}),
    };
    const expected = { ...this.queueSettings.get(action.queue), ...change };
    const answer = await this.engine.configureQueue(action.queue, change);
    check(show(answer) === show(expected), `configure ${action.queue} answered ${show(answer)}, expected ${show(expected)}`);
    this.queueSettings.set(action.queue, expected);
    cover("configure");
    const stats = this.engine.queueStats(action.queue).config;
    check(show(stats) === show(expected), `queue stats of ${action.queue} show ${show(stats)}, expected ${show(expected)}`);
    return this.settle({ kind: "configure", queue: action.queue });
  }

  openSessions(): SimSession[] {
    return this.sessions.filter((s) => s.open);
  }

  /** True when `leaseId` is the live lease of its job (as last written). */
  isCurrent(leaseId: string): boolean {
    const delivery = this.deliveries.get(leaseId)!;
    const written = this.jobs.get(delivery.jid)!.written;
    return written.state === "RUNNING" && written.lease?.leaseId === leaseId;
  }

  async submit(action: SubmitAction): Promise<void> {
    const input: SubmitInput = {
      type: "prop",
      queue: action.queue,
      priority: action.priority,
      reserveForMs: action.reserveForMs,
      retry: {
        maxAttempts: action.maxAttempts,
        ...(action.maxFails !== null ? { maxFails: action.maxFails } : {}),
        ...(action.retryTimeout !== null ? { retryTimeout: action.retryTimeout } : {}),
        ...(action.retrySystem !== null ? { retrySystem: action.retrySystem } : {}),
      },
      ...(action.delayMs !== null ? { delayMs: action.delayMs } : {}),
      ...(action.executionTimeoutMs !== null ? { executionTimeoutMs: action.executionTimeoutMs } : {}),
    };
    const results =
      action.count === 1 ? await this.engine.submit([input], single) : await this.engine.submit(Array(action.count).fill(input), batch);
    this.submits += action.count;
    check(results.length === action.count, `submit of ${action.count} returned ${show(results)}`);
    for (const result of results) {
      check(!result.duplicate, `submit returned ${show(result)}`);
      check(result.state === (action.delayMs !== null ? "DELAYED" : "SCHEDULED"), `submit returned state ${result.state}`);
    }
    await this.settle({ kind: "submit", jids: results.map((result) => result.jid), action });
  }

  async open(workerId: string, queues: string[], credits: number): Promise<SimSession> {
    const sink = new CollectingSink();
    const key = ++this.sessionSeq;
    const handle = this.engine.openLease({ queues, workerId, credits }, sink);
    // The new stream takes over its worker id's orphaned slots.
    for (const slot of this.slots.values()) {
      if (slot.holder === undefined && slot.workerId === workerId) {
        slot.holder = key;
        slot.adopted = true;
        cover("slots adopted");
      }
    }
    const session: SimSession = { key, workerId, queues, credits, sink, handle, open: true, seen: 0, deliveredThisStep: false };
    this.sessions.push(session);
    await this.settle({ kind: "open" });
    return session;
  }

  async close(session: SimSession): Promise<void> {
    const before = new Map<string, JobMeta>();
    for (const info of this.jobs.values()) before.set(info.jid, (await this.engine.getJob(info.jid)).meta);
    session.handle.close();
    session.open = false;
    const orphaned: Slot[] = [];
    for (const [leaseId, slot] of this.slots) {
      if (slot.holder !== session.key) continue;
      const meta = before.get(slot.jid);
      if (meta?.state !== "RUNNING" || meta.lease?.leaseId !== leaseId) {
        // A lease that already lapsed or was revoked frees its slot when its stream ends.
        this.slots.delete(leaseId);
        continue;
      }
      slot.holder = undefined;
      orphaned.push(slot);
    }
    await this.settle({ kind: "close" });
    // Leases of the closed stream lapse within the orphan grace (memory only).
    const cap = this.clock.nowMs() + ORPHAN_GRACE_MS;
    for (const [leaseId, slot] of this.slots) {
      if (!orphaned.includes(slot)) continue;
      const meta = (await this.engine.getJob(slot.jid)).meta;
      if (meta.state !== "RUNNING" || meta.lease?.leaseId !== leaseId) continue;
      const was = before.get(slot.jid)!.lease!.expiresAtMs;
      if (cap < was) cover("lease capped at close");
      check(
        meta.lease.expiresAtMs === Math.min(was, cap),
        `closing session ${session.key} left lease ${leaseId} of job ${slot.jid} expiring at +${meta.lease.expiresAtMs - T0}, expected +${Math.min(was, cap) - T0}`,
      );
    }
  }

  async report(
    leaseId: string,
    op: "ack" | "fail" | "renew",
    category: ReportCategory = "TEMPORARY",
    retryAfterMs: number | null = null,
  ): Promise<void> {
    const delivery = this.deliveries.get(leaseId)!;
    const info = this.jobs.get(delivery.jid)!;
    const held = this.isCurrent(leaseId);
    const before = info.written;
    const now = this.clock.nowMs();
    const ctx: Ctx & { kind: "report" } = { kind: "report", op, jid: info.jid, leaseId, held, consumed: false, category };
    if (held) {
      if (op === "ack") ctx.expected = { state: "COMPLETED" };
      else if (op === "fail") ctx.expected = expectedAfterFail(before, category, retryAfterMs, now, this.queueSettings);
      else ctx.expected = { state: "RUNNING", expiresAtMs: Math.min(now + before.reserveForMs, before.lease!.executionDeadlineMs) };
    }
    let outcome: unknown;
    let error: unknown;
    try {
      if (op === "ack") outcome = await this.engine.ack(info.jid, leaseId, new Uint8Array());
      else if (op === "fail") {
        outcome = await this.engine.fail(info.jid, leaseId, { ...report(), category, ...(retryAfterMs !== null ? { retryAfterMs } : {}) });
      } else outcome = await this.engine.renew(info.jid, leaseId);
    } catch (caught) {
      error = caught;
    }
    const what = `${op} of job ${info.jid} with ${held ? "its live" : "a stale"} lease ${leaseId}`;
    if (held) {
      check(error === undefined, `${what} threw ${String(error)}`);
      if (op === "ack") this.acks++;
      if (op === "fail") {
        // A rate-limited answer is not a failure: not counted as one.
        if (category !== "RATE_LIMITED") this.fails++;
        const expected = ctx.expected!;
        const result = outcome as { state: JobState | null; retryAtMs?: number };
        check(
          result.state === expected.state && result.retryAtMs === expected.dueAtMs,
          `${what} returned ${show(result)}, expected ${show({ state: expected.state, retryAtMs: expected.dueAtMs })}`,
        );
      }
      if (op === "renew")
        check(outcome === ctx.expected!.expiresAtMs, `${what} returned ${String(outcome)}, expected ${ctx.expected!.expiresAtMs}`);
    } else {
      cover(`stale ${op}`);
      check(
        error instanceof WorqError && error.code === "WORQ_LEASE_NOT_HELD" && error.field === "lease_id",
        `${what} did not throw WORQ_LEASE_NOT_HELD (lease_id): ${error instanceof WorqError ? `${error.code}: ${error.message}` : String(error ?? `returned ${show(outcome)}`)}`,
      );
    }
    if (op !== "renew") {
      // A report, even a refused one, frees the worker's slot for that lease.
      this.slots.delete(leaseId);
      delivery.reported = true;
    }
    await this.settle(ctx);
    if (held) check(ctx.consumed, `${what} succeeded but wrote no transition`);
    // A refused report changed nothing (settle() allowed only a lease by the pump, of a SCHEDULED job).
    else if (info.written === before) sameCore(info.observed, before, `after ${what}, the job`);
  }

  /**
   * Cancels a job: an unfinished one becomes CANCELLED, its lease (if any) revoked on the
   * stream that holds its slot; a finished one is refused and left alone.
   */
  async cancel(jid: string): Promise<void> {
    const info = this.jobs.get(jid)!;
    const before = info.written;
    const lease = before.state === "RUNNING" ? before.lease : undefined;
    const holder = lease && this.slots.get(lease.leaseId)?.holder;
    const revokedBefore = this.sessions.map((session) => session.sink.revoked.length);
    let error: unknown;
    try {
      await this.engine.cancel(jid);
    } catch (caught) {
      error = caught;
    }
    const ctx: Ctx = { kind: "cancel", jid, consumed: false };
    if (isTerminal(before.state)) {
      check(
        error instanceof WorqError && error.code === "WORQ_FAILED_PRECONDITION",
        `cancel of a ${before.state} job did not throw WORQ_FAILED_PRECONDITION: ${String(error)}`,
      );
      ctx.consumed = true; // nothing to write
      cover("cancel (finished)");
    } else {
      check(error === undefined, `cancel of a ${before.state} job threw ${String(error)}`);
      cover(`cancel ${before.state}`);
    }
    for (const [i, session] of this.sessions.entries()) {
      const revoked = session.sink.revoked.slice(revokedBefore[i]);
      const expected = lease && holder === session.key ? [{ jid, leaseId: lease.leaseId }] : [];
      check(
        show(revoked.map((r) => ({ jid: r.jid, leaseId: r.leaseId }))) === show(expected),
        `cancel of a ${before.state} job: session ${session.key} was told ${show(revoked)}, expected ${show(expected)}`,
      );
    }
    await this.settle(ctx);
    check(ctx.consumed, `cancel of a ${before.state} job wrote no transition`);
  }

  async advance(ms: number): Promise<void> {
    this.clock.advance(ms);
    this.engine.tick();
    await this.settle({ kind: "tick" });
  }

  async restart(graceful: boolean): Promise<void> {
    const before = new Map<string, JobMeta>();
    for (const info of this.jobs.values()) before.set(info.jid, (await this.engine.getJob(info.jid)).meta);
    const counters = this.engine.info().counters;
    if (graceful) await this.engine.close();
    cover(graceful ? "restart (close)" : "restart (kill)");
    for (const session of this.sessions) session.open = false;
    // No stream survives: every running job's lease is an orphan of its worker id.
    this.slots.clear();
    for (const info of this.jobs.values()) {
      const lease = info.written.lease;
      if (info.written.state === "RUNNING" && lease) {
        this.slots.set(lease.leaseId, { jid: info.jid, workerId: lease.workerId, holder: undefined, adopted: false });
      }
    }
    this.engine = this.newEngine();
    await this.engine.open();
    await this.settle({ kind: "restart" });
    const now = this.clock.nowMs();
    for (const info of this.jobs.values()) {
      const after = (await this.engine.getJob(info.jid)).meta;
      const was = before.get(info.jid)!;
      sameCore(after, was, "after a restart, the job");
      if (after.lease) {
        const expected = Math.min(info.written.lease!.expiresAtMs, now + ORPHAN_GRACE_MS);
        if (expected < info.written.lease!.expiresAtMs) cover("lease capped at restart");
        check(
          after.lease.expiresAtMs === expected,
          `after a restart, lease of job ${info.jid} expires at +${after.lease.expiresAtMs - T0}, expected +${expected - T0}`,
        );
      }
    }
    const countersAfter = this.engine.info().counters;
    check(show(countersAfter) === show(counters), `counters before a restart ${show(counters)}, after ${show(countersAfter)}`);
  }

  /**
   * After the random steps: every session closes, one session with plenty of credits on
   * every queue acks whatever it gets while time moves on. Every job must end terminal.
   */
  async drain(): Promise<void> {
    for (const session of this.openSessions()) await this.close(session);
    const drainer = await this.open("drainer", [...QUEUES], 1_000);
    for (let round = 0; round < 200; round++) {
      for (const [leaseId, delivery] of this.deliveries) {
        if (delivery.session === drainer.key && !delivery.reported && this.isCurrent(leaseId)) await this.report(leaseId, "ack");
      }
      if ([...this.jobs.values()].every((info) => isTerminal(info.written.state))) break;
      await this.advance(2_000);
    }
    const unfinished = [...this.jobs.values()].filter((info) => !isTerminal(info.written.state));
    check(
      unfinished.length === 0,
      `jobs never finished: ${show(unfinished.map((info) => ({ jid: info.jid, ...core(info.written), lease: info.written.lease })))}`,
    );
  }

  // -------------------------------------------------------------------------------------
  // Checks after every step

  async settle(ctx: Ctx): Promise<void> {
    await flush();
    const now = this.clock.nowMs();

    // 1. New deliveries.
    const grantSession = new Map<string, SimSession>();
    for (const session of this.sessions) {
      session.deliveredThisStep = false;
      while (session.seen < session.sink.grants.length) {
        const grant = session.sink.grants[session.seen++]!;
        const leaseId = grant.meta.lease?.leaseId;
        check(
          grant.meta.state === "RUNNING" && leaseId !== undefined,
          `delivered job ${grant.meta.jid} is ${grant.meta.state} without a lease`,
        );
        check(!this.deliveries.has(leaseId) && !grantSession.has(leaseId), `lease ${leaseId} delivered twice`);
        check(session.open, `lease ${leaseId} delivered to closed session ${session.key}`);
        check(
          grant.meta.lease!.workerId === session.workerId,
          `lease of worker ${grant.meta.lease!.workerId} delivered to ${session.workerId}`,
        );
        grantSession.set(leaseId, session);
        session.deliveredThisStep = true;
      }
    }

    // 2. Every write to the store, in order: each one transition.
    const leased = new Set<string>();
    while (this.logCursor < this.log.length) {
      for (const write of this.log[this.logCursor++]!) this.checkWrite(write, ctx, now, grantSession, leased);
    }
    for (const leaseId of grantSession.keys()) check(leased.has(leaseId), `lease ${leaseId} delivered without a lease transition`);

    // 3. What getJob shows: the last write, also in the store; nothing lost.
    for (const info of this.jobs.values()) {
      let meta: JobMeta;
      try {
        meta = (await this.engine.getJob(info.jid)).meta;
      } catch (error) {
        throw new PropertyViolation(`job ${info.jid} lost: getJob threw ${String(error)}`);
      }
      const stored = this.data.metas.get(info.jid);
      check(stored, `job ${info.jid} is not in the store`);
      sameCore(meta, info.written, "getJob vs the last write");
      sameCore(stored, info.written, "the store vs the last write");
      const was = info.observed;
      if (isTerminal(was.state)) check(meta.state === was.state, `terminal job ${info.jid} moved ${was.state} → ${meta.state}`);
      check(
        meta.attempt - was.attempt === info.leasesSinceObserved,
        `job ${info.jid}: attempt ${was.attempt} → ${meta.attempt} with ${info.leasesSinceObserved} lease(s) (less those given back) in between`,
      );
      check((meta.state === "RUNNING") === (meta.lease !== undefined), `job ${info.jid} is ${meta.state} with lease ${show(meta.lease)}`);
      if (meta.lease) {
        // The one lease the engine honours is the latest one handed out for the job.
        check(meta.lease.leaseId === info.leases.at(-1), `job ${info.jid} holds lease ${meta.lease.leaseId}, not its latest delivered`);
      }
      // The owner calls tick() at nextWakeMs(): it must not be later than any pending timer.
      const timerAt = meta.state === "DELAYED" || meta.state === "RETRYING" ? meta.dueAtMs : meta.lease?.expiresAtMs;
      if (timerAt !== undefined) {
        const wake = this.engine.nextWakeMs();
        check(
          wake !== undefined && wake <= timerAt,
          `nextWakeMs +${wake === undefined ? "none" : wake - T0} is after job ${info.jid}'s timer at +${timerAt - T0} (${meta.state})`,
        );
      }
      if (ctx.kind === "tick") {
        // tick() applies every timer that is due.
        if (meta.state === "DELAYED" || meta.state === "RETRYING") {
          check(
            meta.dueAtMs !== undefined && meta.dueAtMs > now,
            `job ${info.jid} ${meta.state} still due at +${meta.dueAtMs! - T0} after tick at +${now - T0}`,
          );
        }
        if (meta.lease) {
          check(
            meta.lease.expiresAtMs > now,
            `job ${info.jid}'s lease expired at +${meta.lease.expiresAtMs - T0} survives tick at +${now - T0}`,
          );
        }
      }
      info.observed = meta;
      info.leasesSinceObserved = 0;
    }

    // 4. Live jobs and counters, in memory and durable.
    const unfinished = [...this.jobs.values()].filter((info) => !isTerminal(info.written.state)).length;
    const { liveJobs, coldReadyJobs } = this.engine.info(); // in memory, and ready ones left in the store
    check(
      liveJobs + coldReadyJobs === unfinished,
      `engine has ${liveJobs} live jobs and ${coldReadyJobs} cold ones, ${unfinished} are unfinished`,
    );
    const counters = this.engine.info().counters;
    check(counters.submitted === this.submits, `counters.submitted ${counters.submitted}, submits ${this.submits}`);
    check(counters.processed === this.acks, `counters.processed ${counters.processed}, acks ${this.acks}`);
    check(counters.failed === this.fails + this.lapses, `counters.failed ${counters.failed}, fails ${this.fails} + lapses ${this.lapses}`);
    if (this.log.length > 0)
      check(show(this.data.counters) === show(counters), `stored counters ${show(this.data.counters)}, engine ${show(counters)}`);

    // 5. Credits: no session holds more unreported jobs than its credits; none idles while
    //    one of its queues has a ready job.
    for (const session of this.openSessions()) {
      const unreported = [...this.deliveries.values()].filter((d) => d.session === session.key && !d.reported).length;
      check(unreported <= session.credits, `session ${session.key} holds ${unreported} unreported jobs with ${session.credits} credits`);
      const held = [...this.slots.values()].filter((slot) => slot.holder === session.key).length;
      if (session.deliveredThisStep) {
        check(held <= session.credits, `session ${session.key} was pushed jobs up to ${held} slots with ${session.credits} credits`);
      }
      if (held < session.credits) {
        const waiting = [...this.jobs.values()].filter(
          (info) => info.written.state === "SCHEDULED" && session.queues.includes(info.input.queue),
        );
        check(
          waiting.length === 0,
          `session ${session.key} (${session.workerId}, ${show(session.queues)}) has ${session.credits - held} free credit(s) while job ${waiting[0]?.jid} waits SCHEDULED`,
        );
      }
    }
  }

  private checkWrite(write: StoreWrite, ctx: Ctx, now: number, grantSession: Map<string, SimSession>, leased: Set<string>): void {
    switch (write.kind) {
      case "put-counters":
        return;
      case "put-queue":
        check(
          (ctx.kind === "submit" || (ctx.kind === "configure" && ctx.queue === write.queue.name)) && !write.queue.paused,
          `unexpected queue record in a ${ctx.kind} step: ${show(write)}`,
        );
        // Every record of a queue carries its settings as the model has them.
        check(
          show(write.queue.config ?? {}) === show(this.queueSettings.get(write.queue.name) ?? {}),
          `queue ${write.queue.name} recorded with ${show(write.queue.config)}, expected ${show(this.queueSettings.get(write.queue.name))}`,
        );
        return;
      case "put-job": {
        const meta = write.meta;
        check(
          ctx.kind === "submit" && ctx.jids.includes(meta.jid) && !this.jobs.has(meta.jid),
          `unexpected new job ${meta.jid} in a ${ctx.kind} step`,
        );
        const action = ctx.action;
        check(
          meta.state === (action.delayMs !== null ? "DELAYED" : "SCHEDULED") && meta.attempt === 0 && meta.fails === 0 && !meta.lease,
          `new job written as ${show(core(meta))}`,
        );
        check(
          meta.retry.maxAttempts === action.maxAttempts &&
            meta.retry.maxFails === action.maxFails &&
            meta.retry.retryTimeout === (action.retryTimeout ?? undefined) &&
            meta.retry.retrySystem === (action.retrySystem ?? undefined),
          `new job's retry policy ${show(meta.retry)}`,
        );
        this.jobs.set(meta.jid, { jid: meta.jid, input: action, written: meta, observed: meta, leasesSinceObserved: 0, leases: [] });
        return;
      }
      case "put-meta":
        return this.checkTransition(write.previous, write.meta, ctx, now, grantSession, leased);
      case "delete-result":
        // An Ack without a result removes one an earlier Fail may have stored: only for a job that failed before.
        check(
          ctx.kind === "report" &&
            this.jobs.get(write.jid)?.written.state === "COMPLETED" &&
            this.jobs.get(write.jid)?.written.failure !== undefined,
          `unexpected result deletion in a ${ctx.kind} step: ${show(write)}`,
        );
        return;
      default:
        throw new PropertyViolation(`unexpected write ${write.kind} in a ${ctx.kind} step: ${show(write)}`);
    }
  }

  private checkTransition(
    previous: JobMeta,
    next: JobMeta,
    ctx: Ctx,
    now: number,
    grantSession: Map<string, SimSession>,
    leased: Set<string>,
  ): void {
    const info = this.jobs.get(next.jid);
    check(info, `transition of unknown job ${next.jid}`);
    const edge = `${previous.state} → ${next.state} of job ${next.jid} in a ${ctx.kind} step`;
    // The engine changed the job as it last wrote it (no lost update, no write from stale memory).
    sameCore(previous, info.written, `the previous meta of ${edge}`);
    check(ALLOWED[previous.state].includes(next.state), `transition not allowed: ${edge}`);
    const isLease = previous.state === "SCHEDULED" && next.state === "RUNNING";
    // A rate-limited answer gives the attempt back (RUNNING → DELAYED, nothing else takes it).
    const givenBack = previous.state === "RUNNING" && next.state === "DELAYED";
    check(next.attempt === previous.attempt + (isLease ? 1 : givenBack ? -1 : 0), `${edge}: attempt ${previous.attempt} → ${next.attempt}`);
    check(next.fails === previous.fails || next.fails === previous.fails + 1, `${edge}: fails ${previous.fails} → ${next.fails}`);
    check((next.state === "RUNNING") === (next.lease !== undefined), `${edge} with lease ${show(next.lease)}`);
    check(ctx.kind !== "restart", `a restart wrote ${edge}`);
    if (ctx.kind === "report" && !ctx.held && ctx.jid === next.jid) {
      // A refused report changes nothing; the pump may still lease a job the report freed a slot for.
      check(isLease, `stale ${ctx.op} with lease ${ctx.leaseId} caused ${edge}`);
    }

    if (ctx.kind === "cancel" && ctx.jid === next.jid && !ctx.consumed) {
      ctx.consumed = true;
      check(next.state === "CANCELLED" && next.failure?.category === "CANCELLED", `cancel: ${edge} (failure ${next.failure?.category})`);
      check(next.fails === previous.fails, `cancel counted as a fail: ${edge}`);
      const lease = previous.lease;
      if (lease) {
        // Revoked: the slot is freed unless a stream that received the job still holds it.
        const slot = this.slots.get(lease.leaseId);
        if (slot && (slot.holder === undefined || slot.adopted)) this.slots.delete(lease.leaseId);
      }
    } else if (isLease) {
      const leaseId = next.lease!.leaseId;
      const session = grantSession.get(leaseId);
      check(session, `${edge}: lease ${leaseId} was never delivered`);
      check(
        session.queues.includes(info.input.queue),
        `job of queue ${info.input.queue} delivered to a session on ${show(session.queues)}`,
      );
      check(!this.deliveries.has(leaseId), `${edge}: lease ${leaseId} reused`);
      leased.add(leaseId);
      this.deliveries.set(leaseId, { jid: next.jid, session: session.key, reported: false });
      this.allLeases.push(leaseId);
      this.slots.set(leaseId, { jid: next.jid, workerId: session.workerId, holder: session.key, adopted: false });
      info.leases.push(leaseId);
      info.leasesSinceObserved++;
    } else if (previous.state === "RUNNING") {
      const lease = previous.lease!;
      const byReport = ctx.kind === "report" && ctx.held && !ctx.consumed && ctx.leaseId === lease.leaseId;
      if (byReport) {
        ctx.consumed = true;
        const expected = ctx.expected!;
        check(next.state === expected.state, `${ctx.op}: ${edge}, expected → ${expected.state}`);
        if (expected.dueAtMs !== undefined)
          check(next.dueAtMs === expected.dueAtMs, `${edge}: due at +${next.dueAtMs! - T0}, expected +${expected.dueAtMs - T0}`);
        if (ctx.op === "renew") {
          check(next.lease!.leaseId === lease.leaseId, `renew changed the lease id: ${edge}`);
          check(
            next.lease!.expiresAtMs === expected.expiresAtMs,
            `renew: lease expires at +${next.lease!.expiresAtMs - T0}, expected +${expected.expiresAtMs! - T0}`,
          );
        }
        const rateLimited = ctx.op === "fail" && ctx.category === "RATE_LIMITED";
        check(
          next.fails === previous.fails + (ctx.op === "fail" && !rateLimited ? 1 : 0),
          `${ctx.op}: ${edge} fails ${previous.fails} → ${next.fails}`,
        );
        if (rateLimited) {
          cover("rate limited");
          // Given back: the attempt its lease counted is not spent.
          info.leasesSinceObserved--;
          check(show(next.failure) === show(previous.failure), `rate limited changed the failure: ${edge}`);
          check(next.previousLeaseIds.at(-1) === lease.leaseId, `rate limited: ${edge} did not keep lease ${lease.leaseId} in history`);
        }
      } else {
        // Nothing but tick() ends a lease on its own: a lapse.
        check(ctx.kind === "tick" && next.state !== "RUNNING", `${edge} without a cause`);
        check(lease.expiresAtMs <= now, `${edge}: lease lapsed early (expires +${lease.expiresAtMs - T0}, now +${now - T0})`);
        // Either lapse is a failure resolved like a Fail (not counted as one): RETRYING after
        // the backoff of the attempt, or DEAD_LETTER when attempts or fails are used up.
        const maxAttempts = previous.retry.maxAttempts;
        const maxFails = previous.retry.maxFails;
        const exhausted = attemptsUsedUp(previous) || (maxFails !== null && previous.fails >= maxFails);
        const timeout = lease.expiresAtMs >= lease.executionDeadlineMs;
        const what = timeout ? "execution timeout" : "lease lapse";
        // Not retried (retry_timeout / retry_system false): FAILED at once.
        const notRetried = !retried(previous, timeout ? "TIMEOUT" : "SYSTEM", this.queueSettings);
        if (notRetried) cover("lapse not retried");
        check(
          next.state === (notRetried ? "FAILED" : exhausted ? "DEAD_LETTER" : "RETRYING"),
          `${what}: ${edge} (attempt ${previous.attempt}/${maxAttempts})`,
        );
        check(next.failure?.category === (timeout ? "TIMEOUT" : "SYSTEM"), `${what} recorded as ${next.failure?.category}`);
        if (!exhausted && !notRetried) check(next.dueAtMs === now + backoffMs(previous.attempt), `${edge}: due at +${next.dueAtMs! - T0}`);
        cover(timeout ? "execution timeout" : "lapse");
        check(next.fails === previous.fails, `a lapse counted as a fail: ${edge}`);
        this.lapses++;
        const slot = this.slots.get(lease.leaseId);
        // A stream still open that received the job keeps its slot until it reports.
        if (slot && (slot.holder === undefined || slot.adopted)) this.slots.delete(lease.leaseId);
      }
    } else if (previous.state === "DELAYED" || previous.state === "RETRYING") {
      check(ctx.kind === "tick" && next.state === "SCHEDULED", `${edge} without a cause`);
      check(previous.dueAtMs !== undefined && previous.dueAtMs <= now, `${edge}: due at +${previous.dueAtMs! - T0}, now +${now - T0}`);
    } else {
      throw new PropertyViolation(`${edge} without a cause`);
    }
    cover(`${previous.state} → ${next.state}`);
    info.written = next;
  }
}

// ---------------------------------------------------------------------------------------

async function runActions(actions: Action[]): Promise<void> {
  const sim = new Sim();
  await sim.start();
  for (const [i, action] of actions.entries()) {
    try {
      await sim.step(action);
    } catch (error) {
      if (error instanceof Error) error.message = `step ${i} ${show(action)}: ${error.message}`;
      throw error;
    }
  }
  try {
    await sim.drain();
  } catch (error) {
    if (error instanceof Error) error.message = `final drain: ${error.message}`;
    throw error;
  }
}

describe("Engine: model-based properties", () => {
  it(
    `random submits, sessions, reports (live and stale), ticks and restarts keep the invariants (${RUNS} runs)`,
    async () => {
      await fc.assert(fc.asyncProperty(fc.array(actionArb, { minLength: 1, maxLength: 40, size: "max" }), runActions), {
        numRuns: RUNS,
        ...(SEED !== undefined ? { seed: SEED } : {}),
        ...(PATH !== undefined ? { path: PATH } : {}),
      });
      if (RUNS >= 100 && SEED === undefined) {
        const missed = MUST_COVER.filter((what) => !COVERAGE.has(what));
        expect(missed, `not exercised in ${RUNS} runs: ${show(Object.fromEntries(COVERAGE))}`).toEqual([]);
      }
    },
    Math.max(120_000, RUNS * 1_000),
  );
});
