/**
 * Faktory's workers: a process says who it is (wid) in HELLO on each of its connections and
 * beats every few seconds; an operator quiets or terminates it, and its next BEAT says so.
 * States only move forward (running → quiet → terminate). A record is kept while any of its
 * connections is open or its last beat is under a minute old, so a client pool that closes
 * idle connections and reconnects keeps its state. Each worker is listed among the engine's
 * workers (ListWorkers, the dashboard) as `faktory:<wid>` and takes its controls from there.
 */
import type { Engine } from "../engine/engine.js";
import type { Reservation } from "./door.js";

export type FaktoryWorkerState = "running" | "quiet" | "terminate";

const STATE_ORDER: Record<FaktoryWorkerState, number> = { running: 0, quiet: 1, terminate: 2 };

/** A worker not heard from (no open connection, no beat) for this long is forgotten. */
const HEARTBEAT_EXPIRY_MS = 60_000;

/** The engine's worker id of a Faktory worker. */
export const FAKTORY_WORKER_PREFIX = "faktory:";

export interface FaktoryWorker {
  wid: string;
  hostname: string;
  pid: number;
  labels: string[];
  startedAtMs: number;
  lastBeatMs: number;
  state: FaktoryWorkerState;
  rssKb?: number;
  /** Open connections that said HELLO with this wid. */
  connections: Set<number>;
  /** The queues of its latest FETCH (shown in the worker list). */
  queues: string[];
  unregister: () => void;
}

export interface Hello {
  wid: string;
  hostname: string;
  pid: number;
  labels: string[];
}

export class FaktoryWorkers {
  private readonly byWid = new Map<string, FaktoryWorker>();

  constructor(
    private readonly engine: Engine,
    private readonly reservations: Map<string, Reservation>,
    private readonly nowMs: () => number,
  ) {}

  /** A connection said HELLO with a wid: the worker's record, created on first sight. */
  join(hello: Hello, connection: number): FaktoryWorker {
    const now = this.nowMs();
    let worker = this.byWid.get(hello.wid);
    if (!worker) {
      const created: FaktoryWorker = {
        ...hello,
        startedAtMs: now,
        lastBeatMs: now,
        state: "running",
        connections: new Set(),
        queues: [],
        unregister: () => {},
      };
      created.unregister = this.engine.registerDoorWorker(`${FAKTORY_WORKER_PREFIX}${hello.wid}`, {
        view: () => ({
          workerId: `${FAKTORY_WORKER_PREFIX}${created.wid}`,
          queues: created.queues,
          credits: 0,
          labels: {
            door: "faktory",
            state: created.state,
            hostname: created.hostname,
            pid: String(created.pid),
            ...(created.labels.length > 0 && { labels: created.labels.join(",") }),
          },
          connectedAtMs: created.startedAtMs,
          held: [...this.reservations.values()].filter((r) => r.wid === created.wid).map(({ jid, leaseId }) => ({ jid, leaseId })),
        }),
        control: (action) => this.advance(created, action === "QUIET" ? "quiet" : "terminate"),
      });
      this.byWid.set(hello.wid, created);
      worker = created;
    }
    worker.connections.add(connection);
    worker.lastBeatMs = now;
    return worker;
  }

  /** A connection of the worker closed. */
  leave(wid: string, connection: number): void {
    this.byWid.get(wid)?.connections.delete(connection);
  }

  get(wid: string): FaktoryWorker | undefined {
    return this.byWid.get(wid);
  }

  /** A BEAT: the worker is alive; a state it reports moves its own state forward. */
  beat(worker: FaktoryWorker, reported: FaktoryWorkerState | undefined, rssKb: number | undefined): void {
    worker.lastBeatMs = this.nowMs();
    if (rssKb !== undefined) worker.rssKb = rssKb;
    if (reported) this.advance(worker, reported);
  }

  /** Forgets workers with no open connection whose last beat is older than the expiry. */
  reap(): void {
    const now = this.nowMs();
    for (const worker of this.byWid.values()) {
      if (worker.connections.size === 0 && now - worker.lastBeatMs > HEARTBEAT_EXPIRY_MS) {
        worker.unregister();
        this.byWid.delete(worker.wid);
      }
    }
  }

  /** Every worker (INFO counts them). */
  all(): FaktoryWorker[] {
    return [...this.byWid.values()];
  }

  /** Forgets every worker (the listener closes). */
  clear(): void {
    for (const worker of this.byWid.values()) worker.unregister();
    this.byWid.clear();
  }

  private advance(worker: FaktoryWorker, state: FaktoryWorkerState): void {
    if (STATE_ORDER[state] > STATE_ORDER[worker.state]) worker.state = state;
  }
}
