/**
 * The claims a submitted job may take (an idempotency, unique or debounce key, at most one:
 * submit-validation refuses more) and the debounce of a waiting job (docs/flow-control.md).
 */
import { jobBody, type JobBody, type JobMeta, type SubmitInput } from "../model/job.js";
import { claimKey, type StoreWrite } from "./store.js";
import type { NewJob } from "./submit-validation.js";
import type { EngineCore } from "./engine-core.js";
import { countCold, ownMeta, readyQueueOf } from "./paging.js";
import { pushExpiry } from "./timers.js";
import { DEBOUNCE_NAMESPACE, UNIQUE_NAMESPACE, takesDebounce } from "./flow-keys.js";

/** A delayed job due within this long keeps its body in memory for its lease, like a ready one. */
export const BODY_CACHE_HORIZON_MS = 10_000;

/** Where a job's idempotency, unique or debounce key is claimed (at most one: submit-validation refuses more). */
export interface ClaimRef {
  kind: "idempotency" | "unique" | "debounce";
  /** claimKey() of the claim. */
  mapKey: string;
  namespace: string | undefined;
  type: string;
  key: string;
}

export function claimRefOf(input: SubmitInput, meta: JobMeta): ClaimRef | undefined {
  if (meta.idempotencyKey !== undefined) {
    const namespace = input.idempotencyNamespace;
    const type = claimTypeOf(input, meta);
    return { kind: "idempotency", mapKey: claimKey(namespace, type, meta.idempotencyKey), namespace, type, key: meta.idempotencyKey };
  }
  const [kind, namespace, key] =
    meta.uniqueKey !== undefined
      ? (["unique", UNIQUE_NAMESPACE, meta.uniqueKey] as const)
      : meta.debounceKey !== undefined
        ? (["debounce", DEBOUNCE_NAMESPACE, meta.debounceKey] as const)
        : [];
  if (kind === undefined) return undefined;
  return { kind, mapKey: claimKey(namespace, meta.queue, key), namespace, type: meta.queue, key };
}

/**
 * Until when a new job's claim holds: an idempotency key for the server's window (or the
 * job's lifetime, when longer and asked for); a WINDOW unique key for its window; a STARTED
 * or FINISHED unique key and a debounce key for the job's lifetime, unless freed earlier
 * (engine-core releaseClaims).
 */
export function claimExpiresAtMs(core: EngineCore, ref: ClaimRef, input: SubmitInput, job: NewJob, meta: JobMeta, nowMs: number): number {
  if (ref.kind === "idempotency") return Math.max(nowMs + core.idempotencyWindowMs, input.idempotencyForLifetime ? meta.expiresAtMs : 0);
  if (ref.kind === "unique" && meta.uniqueUntil === "WINDOW") return nowMs + job.uniqueWindowMs!;
  return meta.expiresAtMs;
}

/**
 * The job a debounced submit may update: `holder` when it is DELAYED or SCHEDULED, never
 * leased, and either in memory or a cold ready job (stored, past its level's window).
 */
export function debounceTarget(core: EngineCore, holder: JobMeta | undefined): holder is JobMeta {
  if (!takesDebounce(holder)) return false;
  if (core.live.has(holder.jid)) return true; // `holder` is its live meta: known() looks there first
  return !core.finishing.has(holder.jid) && isColdReady(core, holder);
}

/** Whether `stored`, not in memory, is a ready job waiting in the store past its level's window. */
function isColdReady(core: EngineCore, stored: JobMeta): boolean {
  if (core.live.has(stored.jid) || stored.state !== "SCHEDULED") return false;
  const queue = core.ready.get(stored.queue)?.find(stored.groupKey ?? "");
  return queue !== undefined && queue.coldAt(stored.priority) > 0 && stored.readySeq > queue.lastSeqAt(stored.priority);
}

/**
 * A debounced submit's writes: the job `jid` (`current`, in memory or cold) takes the new
 * job's args, kwargs, custom and payload (keeping its tags and correlation id, from
 * `oldBody`) and waits DELAYED until the new job's due time; its debounce claim is renewed
 * to its new lifetime.
 */
export function debounce(core: EngineCore, jid: string, current: JobMeta, oldBody: JobBody, job: NewJob, nowMs: number): StoreWrite[] {
  let meta = core.live.get(jid);
  if (!meta) {
    // A cold ready job: it leaves its level's cold count and comes into memory as DELAYED.
    meta = ownMeta(current);
    countCold(core, readyQueueOf(core, meta.queue).lane(meta.groupKey ?? ""), meta.priority, -1);
  }
  const write = core.apply(meta, { kind: "debounce", dueAtMs: job.meta.dueAtMs! });
  const next = core.live.get(jid)!;
  pushExpiry(core, next);
  const body = jobBody(
    { args: job.body.args, kwargs: job.body.kwargs, custom: job.body.custom, tags: oldBody.tags, correlationId: oldBody.correlationId },
    job.body.payload,
  );
  core.bodies.delete(jid);
  if (next.dueAtMs! - nowMs <= BODY_CACHE_HORIZON_MS) core.bodies.offer(jid, body, job.dataBytes);
  const writes: StoreWrite[] = [write, { kind: "put-body", jid, body }];
  const key = claimKey(DEBOUNCE_NAMESPACE, next.queue, next.debounceKey!);
  const claim = core.claims.get(key);
  if (claim?.jid === jid && claim.expiresAtMs !== next.expiresAtMs) {
    const renewed = { ...claim, expiresAtMs: next.expiresAtMs };
    core.claims.set(key, renewed);
    writes.push({ kind: "put-idempotency", claim: renewed });
  }
  return writes;
}

/** The type a job's idempotency key is claimed under: its own, unless its door names jobs across types. */
function claimTypeOf(input: SubmitInput, meta: JobMeta): string {
  return input.idempotencyType ?? meta.type;
}

/** Every 1000 new claims, drops the expired ones (memory and store). */
export function sweepExpiredClaims(core: EngineCore, nowMs: number): StoreWrite[] {
  if (++core.claimsSinceSweep < 1000) return [];
  core.claimsSinceSweep = 0;
  const writes: StoreWrite[] = [];
  for (const [key, claim] of core.claims) {
    if (claim.expiresAtMs > nowMs) continue;
    core.claims.delete(key);
    writes.push({ kind: "delete-idempotency", claim });
  }
  return writes;
}

/** The jobs now holding the debounce keys of `refs` that are not in `read` (a key taken meanwhile by another submit). */
export function newDebounceHolders(core: EngineCore, refs: readonly (ClaimRef | undefined)[], read: ReadonlySet<string>): string[] {
  const jids = new Set<string>();
  for (const ref of refs) {
    const jid = ref?.kind === "debounce" ? core.claims.get(ref.mapKey)?.jid : undefined;
    if (jid !== undefined && !read.has(jid)) jids.add(jid);
  }
  return [...jids];
}
