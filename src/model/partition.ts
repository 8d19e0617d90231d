/**
 * Where a job lives when the job space is split into partitions (docs/scale-out.md): a queue's
 * partition comes from a hash of its name, and a job id or batch id carries its partition in
 * its last ten bits, so a call naming one routes without a lookup. With one partition (the
 * default) every queue and every id is in partition 0, ids made before partitioning included.
 */

import { fnv1a32, MAX_PARTITIONS, PARTITION_BITS, partitionOfId } from "@worq/client/partition.js";
import { WorqError } from "./errors.js";

export { fnv1a32, MAX_PARTITIONS, partitionOfId } from "@worq/client/partition.js";

/** Checks a partition count given by a caller (flag or database), naming `field`. */
export function checkPartitionCount(count: number, field: string): void {
  if (!Number.isInteger(count) || count < 1 || count > MAX_PARTITIONS) {
    throw new RangeError(`${field} must be an integer from 1 to ${MAX_PARTITIONS}, got ${count}`);
  }
}

/**
 * The check an engine serving partition `index` makes of each new job's queue: a job whose
 * queue lives elsewhere is refused, naming where it belongs, since a worker leasing that
 * queue is served by the other partition and would never see it.
 */
export function queuePlacement(partition: { index: number; count: number }): (queue: string, field: string) => void {
  return (queue, field) => {
    const home = fnv1a32(queue) % partition.count;
    if (home !== partition.index) {
      throw new WorqError(
        "WORQ_FAILED_PRECONDITION",
        `${field}: queue "${queue}" lives in partition ${home}; this is partition ${partition.index} (send it to that partition's owner)`,
        field,
      );
    }
  };
}

/**
 * The partitions of `queue`: one by default; a hot queue spread over `spread` partitions has
 * the ones after its home partition too (wrapping), so queues spread by the same amount do
 * not all pile onto the same partitions.
 */
export function queuePartitions(queue: string, count: number, spread = 1): number[] {
  const home = fnv1a32(queue) % count;
  const width = Math.min(Math.max(1, spread), count);
  return Array.from({ length: width }, (_, i) => (home + i) % count);
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
