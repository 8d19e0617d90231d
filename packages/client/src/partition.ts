/**
 * Where a job lives on a partitioned cluster (the server's docs/scale-out.md): a queue's home
 * partition comes from a hash of its name, and a job id or batch id carries its partition in
 * its last ten bits. The server places jobs with these same functions, so a library routes a
 * call straight to the partition's own server. With one partition everything is in partition 0.
 */

/** Ten bits of an id carry its partition. */
export const MAX_PARTITIONS = 1024;
/** The bits of an id's last hex digits that name its partition. */
export const PARTITION_BITS = MAX_PARTITIONS - 1;

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

/** The home partition of `queue` out of `count`. */
export function queueHome(queue: string, count: number): number {
  return fnv1a32(queue) % count;
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

/** The keys of a new job that decide where it goes in a spread queue (a JobSpec, or the engine's submit input). */
export interface PlacementKeys {
  unique?: { key?: string };
  debounce?: { key?: string };
  groupKey?: string;
  idempotencyKey?: string;
}

/**
 * The key a job of a spread queue is placed by: the first set of its unique, debounce, group
 * and idempotency keys, so jobs that share one meet in the partition that holds it ("" none).
 */
export function placementKey(job: PlacementKeys): string {
  return job.unique?.key || job.debounce?.key || job.groupKey || job.idempotencyKey || "";
}

/** Of a spread queue's `partitions`, the one a job with placement key `key` goes to. */
export function keyedPartition(partitions: readonly number[], key: string): number {
  return partitions[fnv1a32(key) % partitions.length]!;
}

/**
 * Whose turn it is, per spread queue, for jobs without a placement key: a counter per queue
 * (one shared by all would pin each of two queues submitted alternately to one partition),
 * starting at a random turn (so short-lived clients do not all fill the first partition).
 */
export class SpreadTurns {
  private readonly turns = new Map<string, number>();

  next(queue: string): number {
    const turn = this.turns.get(queue) ?? Math.floor(Math.random() * MAX_PARTITIONS);
    this.turns.set(queue, turn + 1);
    return turn;
  }
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

/**
 * `total` split over `parts` as evenly as it goes (the first ones get the remainder), at least
 * one each: how a worker's credits are shared among its streams to several partitions.
 */
export function evenShares(total: number, parts: number): number[] {
  return Array.from({ length: parts }, (_, i) => Math.max(1, Math.floor(total / parts) + (i < total % parts ? 1 : 0)));
}
