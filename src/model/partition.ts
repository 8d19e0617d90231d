/**
 * Where a job lives when the job space is split into partitions (docs/scale-out.md): a queue's
 * partition comes from a hash of its name, and a job id or batch id carries its partition in
 * its last ten bits, so a call naming one routes without a lookup. With one partition (the
 * default) every queue and every id is in partition 0, ids made before partitioning included.
 */

import {
  fnv1a32,
  keyedPartition,
  MAX_PARTITIONS,
  PARTITION_BITS,
  partitionOfId,
  placementKey,
  queuePartitions,
  type PlacementKeys,
} from "@worq/client/partition.js";
import { WorqError } from "./errors.js";
import { LIMITS } from "./limits.js";
import type { ScheduleSpec } from "./schedule.js";

export {
  fnv1a32,
  keyedPartition,
  MAX_PARTITIONS,
  partitionOfId,
  placementKey,
  queuePartitions,
  SpreadTurns,
} from "@worq/client/partition.js";
export type { PlacementKeys } from "@worq/client/partition.js";

/** Checks a partition count given by a caller (flag or database), naming `field`. */
export function checkPartitionCount(count: number, field: string): void {
  if (!Number.isInteger(count) || count < 1 || count > MAX_PARTITIONS) {
    throw new RangeError(`${field} must be an integer from 1 to ${MAX_PARTITIONS}, got ${count}`);
  }
}

/** Hot queues spread over several partitions, by name: how many partitions each (2 or more). */
export type SpreadQueues = Readonly<Record<string, number>>;

/**
 * How many partitions `queue` is spread over (undefined: not spread). An own property only:
 * a queue may be named "toString" or "constructor", which a plain object also answers.
 */
export function spreadOf(spread: SpreadQueues | undefined, queue: string): number | undefined {
  return spread !== undefined && Object.hasOwn(spread, queue) ? spread[queue] : undefined;
}

/** Where jobs are placed: the partition count and the spread queues. */
export interface PartitionLayout {
  count: number;
  spread: SpreadQueues;
}

/**
 * `--spread-queues`: `queue=k` pairs joined by commas, each queue spread over k partitions
 * (2 to `count`); throws naming `field` and the pair at fault.
 */
export function parseSpreadQueues(text: string, count: number, field: string): SpreadQueues {
  const spread: Record<string, number> = {};
  for (const pair of text.split(",").map((part) => part.trim())) {
    if (pair === "") continue;
    const match = /^([^=\s]+)=(\d+)$/.exec(pair);
    if (!match) throw new RangeError(`${field}: ${JSON.stringify(pair)} is not queue=partitions (e.g. emails=4)`);
    const [, queue, width] = match as unknown as [string, string, string];
    if (queue.length > LIMITS.queueMaxChars || !LIMITS.queuePattern.test(queue)) {
      throw new RangeError(
        `${field}: ${JSON.stringify(queue)} is not a queue name (^[a-zA-Z][a-zA-Z0-9_.-]*$, at most ${LIMITS.queueMaxChars} chars)`,
      );
    }
    const k = Number(width);
    if (k < 2 || k > count)
      throw new RangeError(`${field}: ${queue} spread over ${k} partitions; it takes 2 to ${count} (the partition count)`);
    if (Object.hasOwn(spread, queue)) throw new RangeError(`${field}: ${queue} is given twice`);
    spread[queue] = k;
  }
  return spread;
}

/** The spread queues as `--spread-queues` writes them, by name: "a=2,b=4" ("" for none). */
export function formatSpreadQueues(spread: SpreadQueues): string {
  return Object.keys(spread)
    .sort()
    .map((queue) => `${queue}=${spread[queue]}`)
    .join(",");
}

/**
 * The check an engine serving partition `index` makes of each new job: a job whose queue
 * lives elsewhere is refused, naming where it belongs, since a worker leasing that queue is
 * served by the other partitions and would never see it; so is a keyed job of a spread queue
 * sent to another of its partitions than its key's, whose claim would not meet the others'.
 */
export function queuePlacement(partition: {
  index: number;
  count: number;
  spread?: SpreadQueues;
}): (queue: string, job: PlacementKeys, field: string) => void {
  return (queue, job, field) => {
    // Every submitted job passes here: a queue that is not spread needs only its hash.
    if (spreadOf(partition.spread, queue) === undefined && fnv1a32(queue) % partition.count === partition.index) return;
    const { home, key } = jobPartitions(queue, job, partition);
    if (!home.includes(partition.index)) {
      const where = home.length === 1 ? `partition ${home[0]}` : `partitions ${home.join(", ")}`;
      const whose = key ? `a job of spread queue "${queue}" with key "${key}"` : `queue "${queue}"`;
      throw new WorqError(
        "WORQ_FAILED_PRECONDITION",
        `${field}.queue: ${whose} lives in ${where}; this is partition ${partition.index} (send it to that partition's owner)`,
        `${field}.queue`,
      );
    }
  };
}

/** `uuid` (a UUID v4 string, lower-case hex) with its last ten bits set to `partition`. */
export function withPartition(uuid: string, partition: number): string {
  // The last three hex digits hold twelve bits: two stay random, ten name the partition.
  const last = Number.parseInt(uuid.slice(33), 16);
  const bits = (last & ~PARTITION_BITS & 0xfff) | partition;
  return uuid.slice(0, 33) + bits.toString(16).padStart(3, "0");
}

/** The partition `id` names when it is not `partition.index` (and is one of its count); undefined otherwise. */
export function foreignPartition(id: string, partition: { index: number; count: number }): number | undefined {
  const named = partitionOfId(id, partition.count);
  return named === partition.index ? undefined : named;
}

/** The partitions a new job of `queue` may be stored in: the queue's, or the one its key names in a spread queue. */
export function jobPartitions(
  queue: string,
  job: PlacementKeys,
  layout: { count: number; spread?: SpreadQueues },
): { home: number[]; key: string } {
  const partitions = queuePartitions(queue, layout.count, spreadOf(layout.spread, queue));
  const key = partitions.length > 1 ? placementKey(job) : "";
  return { home: key ? [keyedPartition(partitions, key)] : partitions, key };
}

/** The partition a schedule lives in, by its name (its ticks enqueue from there). */
export function scheduleHome(name: string, count: number): number {
  return fnv1a32(name) % count;
}

/** Of the --schedules file, the schedules partition `partition` keeps (all with one partition). */
export function schedulesOfPartition(
  specs: readonly ScheduleSpec[],
  partition: { index: number; count: number } | undefined,
): ScheduleSpec[] {
  return partition && partition.count > 1
    ? specs.filter((spec) => scheduleHome(spec.name, partition.count) === partition.index)
    : [...specs];
}

/**
 * Refuses, naming the schedule, a --schedules file with a schedule whose job could not be
 * enqueued from the schedule's partition (its queue lives elsewhere): checked before any
 * partition is served, since the partition would otherwise refuse to load.
 */
export function checkSchedulesPlacement(specs: readonly ScheduleSpec[], layout: PartitionLayout, file: string): void {
  specs.forEach((spec, i) => {
    const at = scheduleHome(spec.name, layout.count);
    const queue = spec.job.queue || LIMITS.defaultQueue;
    const { home } = jobPartitions(queue, spec.job, layout);
    if (!home.includes(at)) {
      throw new Error(
        `--schedules ${file}: schedules[${i}] ("${spec.name}") lives in partition ${at} (by its name) but its job goes to queue "${queue}" in partition ${home.join(" or ")}: rename the schedule or pick a queue of partition ${at}`,
      );
    }
  });
}
