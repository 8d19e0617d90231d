import { WorqError } from "../../model/errors.js";

/**
 * The queues a token may touch: every queue (no `queues=` on its line), or those matching
 * one of its glob patterns, where `*` matches any run of characters (`billing.*` matches
 * `billing.eu` and `billing.eu.retry`, not `billing`).
 */
export interface QueueScope {
  /** True for a token without `queues=`: every check passes and nothing is filtered. */
  readonly all: boolean;
  /** The patterns sorted and without repeats, joined by commas; "" for every queue. */
  readonly text: string;
  allows(queue: string): boolean;
}

/** The scope of a token without `queues=`, and of every caller when token auth is off. */
export const ALL_QUEUES: QueueScope = { all: true, text: "", allows: () => true };

/** A queue name with `*` allowed anywhere: queue names start with a letter, patterns may start with `*`. */
const PATTERN = /^[a-zA-Z*][a-zA-Z0-9_.*-]*$/;

/**
 * The scope of `queues=<patterns>` (the text after `=`: comma-separated patterns). A lone `*`
 * is every queue. Throws an Error saying what is wrong with the text; the caller adds where.
 */
export function parseQueueScope(text: string): QueueScope {
  const patterns = text.split(",");
  for (const pattern of patterns) {
    if (!PATTERN.test(pattern)) {
      throw new Error(
        `queues=: ${JSON.stringify(pattern)} is not a queue pattern (letters, digits, _ . - and *, starting with a letter or *)`,
      );
    }
  }
  if (patterns.includes("*")) return ALL_QUEUES;
  const sorted = [...new Set(patterns)].sort();
  const escaped = sorted.map((pattern) => pattern.replace(/[.\-]/g, "\\$&").replace(/\*+/g, ".*"));
  const matcher = new RegExp(`^(?:${escaped.join("|")})$`);
  return { all: false, text: sorted.join(","), allows: (queue) => matcher.test(queue) };
}

/**
 * Throws WORQ_PERMISSION_DENIED naming `field` unless `scope` allows `queue`: for names the
 * caller chose (a submit's queue, a queue to lease from, pause or purge), which it knows anyway.
 */
export function checkQueueInScope(scope: QueueScope, queue: string, field: string): void {
  if (!scope.allows(queue)) {
    throw new WorqError(
      "WORQ_PERMISSION_DENIED",
      `${field}: the queue ${JSON.stringify(queue)} is outside this token's queues (${scope.text})`,
      field,
    );
  }
}

/**
 * Throws WORQ_NOT_FOUND, worded exactly as for a jid that does not exist, unless `scope`
 * allows `queue` (the queue of job `jid`): a caller must not learn that a job outside its
 * queues exists, so it cannot tell the two apart.
 */
export function checkJobInScope(scope: QueueScope, jid: string, queue: string): void {
  if (!scope.allows(queue)) throw new WorqError("WORQ_NOT_FOUND", `job ${jid} not found`, "jid");
}
