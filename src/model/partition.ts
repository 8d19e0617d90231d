/**
 * Where a job lives when the job space is split into partitions (docs/scale-out.md): a queue's
 * partition comes from a hash of its name, and a job id or batch id carries its partition in
 * its last ten bits, so a call naming one routes without a lookup. With one partition (the
 * default) every queue and every id is in partition 0, ids made before partitioning included.
 */

import { WorqError } from "./errors.js";

/** Ten bits of an id carry its partition. */
export const MAX_PARTITIONS = 1024;
const PARTITION_BITS = MAX_PARTITIONS - 1;

/** Checks a partition count given by a caller (flag or database), naming `field`. */
export function checkPartitionCount(count: number, field: string): void {
  if (!Number.isInteger(count) || count < 1 || count > MAX_PARTITIONS) {
    throw new RangeError(`${field} must be an integer from 1 to ${MAX_PARTITIONS}, got ${count}`);
  }
}

/**
 * FNV-1a, 32 bits, over the UTF-8 bytes of `text`: small, fast, the same in every language
 * (so a library in another language can place queues as the server does), and even enough
 * for queue names, which are short and often share a prefix.
 */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text, "utf8")) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
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

/**
 * The partition an id names, out of `count`; undefined when its bits name none of them (no
 * such job can exist). With one partition every id is in partition 0.
 */
export function partitionOfId(id: string, count: number): number | undefined {
  if (count === 1) return 0;
  const partition = Number.parseInt(id.slice(33), 16) & PARTITION_BITS;
  return partition < count ? partition : undefined;
}
