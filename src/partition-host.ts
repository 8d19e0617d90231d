import { performance } from "node:perf_hooks";
import pg from "pg";
import { Engine } from "./engine/engine.js";
import type { EngineOptions } from "./engine/engine-types.js";
import type { Logger } from "./log.js";
import { prepareOwnership } from "./storage/postgres/migrations.js";
import {
  claimPartition,
  fairShare,
  leaveNodes,
  liveNodes,
  partitionOwners,
  publishAddress,
  releasePartition,
  renewPartition,
  settlePartitionLayout,
  type PartitionOwner,
} from "./storage/postgres/partition-ownership.js";
import { PostgresStore } from "./storage/postgres/postgres-store.js";
import { formatSpreadQueues, type SpreadQueues } from "./model/partition.js";

/** One partition as its owner got it: what serving it needs to know. */
export interface PartitionSlot {
  index: number;
  /** The cluster's partition count. */
  count: number;
  /** The cluster's spread queues: the engine takes their jobs in each of their partitions. */
  spread: SpreadQueues;
  /** The epoch of this ownership: the store fences every commit with it. */
  epoch: number;
  /** Whether a lease may be granted now: false once the last confirmed renewal is too old. */
  mayGrant(): boolean;
  /** Called by the served partition when a commit failed: it is dropped (and released). */
  failed(): void;
}

/** What serves one partition: an engine, or a whole server on its own port. */
export interface ServedPartition {
  close(): Promise<void>;
  /** Where other nodes reach it (gRPC host:port), if it has a port. */
  grpcAddress?: string;
  /** Where its HTTP port is (host:port), for the job JSON routes. */
  httpAddress?: string;
  /** Where its Faktory port is (host:port), when the node serves one. */
  faktoryAddress?: string;
  /** Where its Workq port is (host:port), when the node serves one. */
  workqAddress?: string;
}

export interface PartitionHostOptions<S extends ServedPartition> {
  /** The database every node shares. */
  url: string;
  nodeId: string;
  /** The cluster's partition count. */
  count: number;
  /** The spread queues this node was started with; undefined: whatever the cluster has on record. */
  spread?: SpreadQueues;
  /** How long a claim holds without a renewal: a dead node's partitions are taken after it (default 5 s). */
  leaseMs?: number;
  /** How often leases are renewed and lapsed partitions taken (default 1 s). */
  tickMs?: number;
  /** Loads a claimed partition and serves it; throws when it cannot (the claim is released). */
  open(slot: PartitionSlot): Promise<S>;
  log: Logger;
}

interface Owned<S> {
  epoch: number;
  served: S;
  /** When (monotonic ms) the last renewal that the database confirmed was sent; the engine's lease gate reads it. */
  renewal: { confirmedAtMs: number };
}

/** A lease is used only this far into it: a renewal's answer may come late. */
const GRANT_SHARE = 0.9;

/**
 * The partitions one node owns, each served on its own slice of the store by what `open`
 * makes of it (an engine, or a whole server on its own port), claimed and renewed in the
 * shared ownership table (docs/scale-out.md). It takes every partition that is free or whose
 * owner's lease ran out, renews its own each tick, and drops one whose renewal finds another
 * owner or whose engine hit a storage failure. A partition's engine grants
 * leases only within GRANT_SHARE of the lease since its last confirmed renewal, so an owner
 * that was paused grants nothing from memory when it wakes; what it still tries to commit is
 * refused by the epoch fence. Each node serves its fair share of the partitions among the
 * nodes seen alive (fairShare): one that joins is handed partitions by those over their
 * share, one that stops or dies leaves its share to the others.
 */
export class PartitionHost<S extends ServedPartition> {
  private readonly owned = new Map<number, Owned<S>>();
  private owners = new Map<number, PartitionOwner>();
  private readonly client: pg.Client;
  private readonly leaseMs: number;
  private readonly tickMs: number;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> = Promise.resolve();
  private stopped = false;
  /** The cluster's spread queues, as on record (read at start). */
  spread: SpreadQueues = {};

  constructor(private readonly options: PartitionHostOptions<S>) {
    this.client = new pg.Client({ connectionString: options.url, application_name: `worq-partitions:${options.nodeId}` });
    this.client.on("error", (error) => options.log.warn("partition ownership connection lost", { error: error.message }));
    this.leaseMs = options.leaseMs ?? 5_000;
    this.tickMs = options.tickMs ?? 1_000;
  }

  async start(): Promise<void> {
    await this.client.connect();
    await prepareOwnership(this.client);
    const { count, spread } = await settlePartitionLayout(this.client, { count: this.options.count, spread: this.options.spread ?? {} });
    const [recorded, given] = [formatSpreadQueues(spread), this.options.spread && formatSpreadQueues(this.options.spread)];
    if (count !== this.options.count || (given !== undefined && given !== recorded)) {
      await this.client.end().catch(() => {});
      throw new Error(
        count !== this.options.count
          ? `the cluster of this database has ${count} partitions; this node was started with ${this.options.count}`
          : `the cluster of this database spreads queues as --spread-queues "${recorded}"; this node was started with "${given}" (leave the flag out to take the cluster's)`,
      );
    }
    this.spread = spread;
    await this.tick();
    this.timer = setInterval(() => {
      // Outside the tick chain: a tick stuck on a dead connection must not keep a lapsed partition served.
      this.expireLapsed();
      this.ticking = this.ticking
        .then(() => this.tick())
        .catch((error: Error) => this.options.log.warn("partition tick failed", { error: error.message }));
    }, this.tickMs);
  }

  /** The partitions this node serves now, in order. */
  partitions(): number[] {
    return [...this.owned.keys()].sort((a, b) => a - b);
  }

  servedOf(partition: number): S | undefined {
    return this.owned.get(partition)?.served;
  }

  /** Who serves each partition, as the ownership table said at the last tick. */
  ownerOf(partition: number): PartitionOwner | undefined {
    return this.owners.get(partition);
  }

  /** Reads the ownership table now (a caller told "moved" need not wait for the next tick). */
  async refreshOwners(): Promise<void> {
    this.owners = await partitionOwners(this.client);
  }

  /** Stops renewing (a graceful stop): each engine closes, then its partition is released for the next owner. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.ticking;
    await leaveNodes(this.client, this.options.nodeId).catch(() => {});
    for (const partition of this.partitions()) await this.drop(partition, "stopping", true);
    await this.client.end().catch(() => {});
  }

  /**
   * Says it is alive, renews what it owns, then moves toward its fair share among the live
   * nodes: over it, it hands one partition back (one move at a time, so the cluster never
   * drops many at once); under it, it takes free or lapsed ones. One tick at a time.
   */
  private async tick(): Promise<void> {
    const live = await liveNodes(this.client, this.options.nodeId, this.leaseMs);
    for (const [partition, owned] of [...this.owned]) {
      const sentAtMs = performance.now();
      if (await renewPartition(this.client, partition, this.options.nodeId, owned.epoch, this.leaseMs))
        owned.renewal.confirmedAtMs = sentAtMs;
      else await this.drop(partition, "another node owns it now", false);
    }
    const target = fairShare(this.options.count, live.length, live.indexOf(this.options.nodeId));
    if (this.owned.size > target) {
      await this.drop(this.partitions().at(-1)!, "handed over: more than this node's share", true);
    } else {
      for (let partition = 0; partition < this.options.count && this.owned.size < target && !this.stopped; partition++) {
        if (this.owned.has(partition)) continue;
        const sentAtMs = performance.now();
        const epoch = await claimPartition(this.client, partition, this.options.nodeId, this.leaseMs);
        if (epoch !== undefined) await this.serve(partition, epoch, sentAtMs);
      }
    }
    await this.refreshOwners();
  }

  /**
   * Stops serving, on this process's own clock, each partition whose lease ran out without a
   * confirmed renewal: another node may own it by now. (Safety does not rest on this clock:
   * the epoch fences the writes; this frees the engine and its connections.)
   */
  private expireLapsed(): void {
    const now = performance.now();
    for (const [partition, owned] of this.owned) {
      if (now - owned.renewal.confirmedAtMs > this.leaseMs)
        void this.drop(partition, "its lease ran out without a confirmed renewal", false);
    }
  }

  private async serve(partition: number, epoch: number, confirmedAtMs: number): Promise<void> {
    const renewal = { confirmedAtMs };
    let served: S;
    try {
      served = await this.options.open({
        index: partition,
        count: this.options.count,
        spread: this.spread,
        epoch,
        mayGrant: () => performance.now() - renewal.confirmedAtMs < this.leaseMs * GRANT_SHARE,
        // A failed commit: moved (the fence) or storage trouble. Either way the partition's memory
        // may be ahead of the store: drop it, and reload (here or elsewhere) from the store.
        failed: () => void this.drop(partition, "a commit failed", true),
      });
    } catch (error) {
      this.options.log.warn("could not load partition", { partition, error: (error as Error).message });
      await releasePartition(this.client, partition, this.options.nodeId, epoch).catch(() => {});
      return;
    }
    // Served once loaded: it answers for every job of its slice from here on.
    this.owned.set(partition, { epoch, served, renewal });
    if (served.grpcAddress !== undefined)
      await publishAddress(this.client, partition, this.options.nodeId, epoch, {
        grpcAddress: served.grpcAddress,
        ...(served.httpAddress !== undefined && { httpAddress: served.httpAddress }),
        ...(served.faktoryAddress !== undefined && { faktoryAddress: served.faktoryAddress }),
        ...(served.workqAddress !== undefined && { workqAddress: served.workqAddress }),
      });
    this.options.log.info("serving partition", { partition, epoch });
  }

  private async drop(partition: number, why: string, release: boolean): Promise<void> {
    const owned = this.owned.get(partition);
    if (!owned) return;
    this.owned.delete(partition);
    this.options.log.info("dropping partition", { partition, epoch: owned.epoch, why });
    await owned.served.close().catch(() => {});
    if (release) await releasePartition(this.client, partition, this.options.nodeId, owned.epoch).catch(() => {});
  }
}

/**
 * Serves each partition with a bare engine on its fenced slice (no port): for a process that
 * drives the engines itself.
 */
export function engineOnSlice(
  url: string,
  nodeId: string,
  engineOptions: Omit<EngineOptions, "store" | "partition" | "mayGrant" | "onFatal">,
): (slot: PartitionSlot) => Promise<Engine> {
  return async (slot) => {
    const store = new PostgresStore(url, {
      partition: { index: slot.index, epoch: slot.epoch },
      applicationName: `worq-p${slot.index}:${nodeId}`,
    });
    const engine = new Engine({
      ...engineOptions,
      store,
      partition: { index: slot.index, count: slot.count, spread: slot.spread },
      mayGrant: slot.mayGrant,
      onFatal: slot.failed,
    });
    try {
      await engine.open();
    } catch (error) {
      await engine.close().catch(() => {});
      throw error;
    }
    return engine;
  };
}
