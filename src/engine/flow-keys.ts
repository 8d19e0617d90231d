/**
 * Unique jobs and debounce (docs/flow-control.md): checking a submit's options, deriving a
 * unique key, and the claims both keep. Both reuse the idempotency claims (store.ts
 * IdempotencyClaim), each in a namespace of its own that no caller's queue scope can name
 * (scopes are queue patterns, which never start with `#`), with the job's queue as the
 * claim's type: so keys are scoped to the queue, stored, swept and recovered like
 * idempotency keys.
 */
import { createHash } from "node:crypto";
import { invalid } from "../model/errors.js";
import { isTerminal, type JobMeta, type JsonValue, type SubmitInput } from "../model/job.js";
import { checkKeyText } from "./value-checks.js";
import { claimKey, type IdempotencyClaim, type StoreWrite } from "./store.js";

/** The claim namespace of unique keys. */
export const UNIQUE_NAMESPACE = "#unique";
/** The claim namespace of debounce keys. */
export const DEBOUNCE_NAMESPACE = "#debounce";

const KEY_MAX_CHARS = 256;
const MIN_WINDOW_MS = 1000;
const MAX_SPAN_MS = 30 * 24 * 3_600_000;
const DEFAULT_WINDOW_MS = 24 * 3_600_000;

/**
 * Checks a submit's unique and debounce options against each other and the fields they
 * exclude; throws WORQ_INVALID_ARGUMENT naming the field. `field` is the job's prefix.
 */
export function checkFlowOptions(input: SubmitInput, field: string): void {
  const { unique, debounce } = input;
  if (unique) {
    if (input.idempotencyKey !== undefined) invalid(`${field}.idempotency_key`, "cannot be combined with unique");
    if (debounce) invalid(`${field}.debounce`, "cannot be combined with unique");
    if (unique.key !== undefined) checkKey(unique.key, `${field}.unique.key`, false);
    if (unique.windowMs !== undefined) {
      if ((unique.until ?? "WINDOW") !== "WINDOW") invalid(`${field}.unique.window`, "is only for until WINDOW; leave it unset");
      if (!(Number.isInteger(unique.windowMs) && unique.windowMs >= MIN_WINDOW_MS && unique.windowMs <= MAX_SPAN_MS)) {
        invalid(`${field}.unique.window`, "must be whole milliseconds between 1s and 30 days");
      }
    }
  }
  if (debounce) {
    checkKey(debounce.key, `${field}.debounce.key`, true);
    if (!(Number.isInteger(debounce.delayMs) && debounce.delayMs >= 1 && debounce.delayMs <= MAX_SPAN_MS)) {
      invalid(`${field}.debounce.delay`, "is required: whole milliseconds between 1ms and 30 days");
    }
    if (input.atMs !== undefined) invalid(`${field}.at`, "cannot be combined with debounce (debounce.delay sets the start)");
    if (input.delayMs !== undefined) invalid(`${field}.delay`, "cannot be combined with debounce (debounce.delay sets the start)");
    if (input.dependsOn !== undefined) invalid(`${field}.depends_on`, "cannot be combined with debounce");
    if (input.idempotencyKey !== undefined) invalid(`${field}.idempotency_key`, "cannot be combined with debounce");
  }
}

function checkKey(key: string, field: string, required: boolean): void {
  if (required && key.length === 0) invalid(field, "is required");
  if (key.length > KEY_MAX_CHARS) invalid(field, `must be at most ${KEY_MAX_CHARS} chars`);
  checkKeyText(key, field);
}

/** The unique key, until and window (ms) a job takes, when it is unique. */
export function uniqueOf(
  input: SubmitInput,
  type: string,
  queue: string,
  payload: Uint8Array,
): { key: string; until: NonNullable<JobMeta["uniqueUntil"]>; windowMs: number } | undefined {
  if (!input.unique) return undefined;
  const key = input.unique.key || derivedUniqueKey(type, queue, input.args, input.kwargs, payload);
  return { key, until: input.unique.until ?? "WINDOW", windowMs: input.unique.windowMs ?? DEFAULT_WINDOW_MS };
}

/**
 * The key of a unique job submitted without one: "sha256:" and the hex SHA-256 of the UTF-8
 * JSON array [type, queue, args, kwargs, payload as base64], with args [] and kwargs {} when
 * absent and every object's keys sorted (at any depth), no spaces. Custom, tags and every
 * other field are left out.
 */
export function derivedUniqueKey(
  type: string,
  queue: string,
  args: JsonValue[] | undefined,
  kwargs: { [key: string]: JsonValue } | undefined,
  payload: Uint8Array,
): string {
  const text = canonicalJson([type, queue, args ?? [], kwargs ?? {}, Buffer.from(payload).toString("base64")]);
  return `sha256:${createHash("sha256").update(text, "utf8").digest("hex")}`;
}

function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key]!)}`).join(",")}}`;
}

/** Whether a job has ever been leased (a debounce key and a STARTED unique key end then). */
function hasStarted(meta: JobMeta): boolean {
  return meta.attempt > 0 || meta.startedAtMs !== undefined || meta.lease !== undefined || meta.previousLeaseIds.length > 0;
}

/**
 * Whether `holder` (undefined: deleted) still holds its unique key, for a claim not yet
 * expired: a WINDOW key whatever the job does; a STARTED key until the job is first leased
 * or ends; a FINISHED key until the job ends.
 */
export function holdsUnique(holder: JobMeta | undefined): boolean {
  if (holder === undefined) return false;
  const until = holder.uniqueUntil ?? "WINDOW";
  if (until === "WINDOW") return true;
  if (isTerminal(holder.state)) return false;
  return until === "FINISHED" || !hasStarted(holder);
}

/** Whether `holder` still takes debounced submits: DELAYED or SCHEDULED and never leased. */
export function takesDebounce(holder: JobMeta | undefined): holder is JobMeta {
  return holder !== undefined && (holder.state === "DELAYED" || holder.state === "SCHEDULED") && !hasStarted(holder);
}

/**
 * The claims a write of `meta` (its deletion when `deleted`) ends: a STARTED
 * unique key and a debounce key at the first lease, those and a FINISHED key when the job ends.
 */
function endedClaims(meta: JobMeta, deleted: boolean): IdempotencyClaim[] {
  const ended: IdempotencyClaim[] = [];
  const over = deleted || isTerminal(meta.state);
  if (meta.uniqueKey !== undefined && meta.uniqueUntil !== undefined && meta.uniqueUntil !== "WINDOW") {
    if (over || (meta.uniqueUntil === "STARTED" && hasStarted(meta))) {
      ended.push({ namespace: UNIQUE_NAMESPACE, type: meta.queue, key: meta.uniqueKey, jid: meta.jid, expiresAtMs: 0 });
    }
  }
  if (meta.debounceKey !== undefined && (over || hasStarted(meta))) {
    ended.push({ namespace: DEBOUNCE_NAMESPACE, type: meta.queue, key: meta.debounceKey, jid: meta.jid, expiresAtMs: 0 });
  }
  return ended;
}

/**
 * The unique and debounce keys that `writes` end, taken out of `claims` (the engine's, by
 * claimKey), as writes that delete them in the same commit: a key is free once the write that
 * frees it is.
 */
export function releaseEndedClaims(claims: Map<string, IdempotencyClaim>, writes: readonly StoreWrite[]): StoreWrite[] {
  let released: StoreWrite[] | undefined;
  for (const write of writes) {
    if (write.kind !== "put-meta" && write.kind !== "delete-job") continue;
    const meta = write.meta;
    if (meta.uniqueKey === undefined && meta.debounceKey === undefined) continue;
    for (const claim of endedClaims(meta, write.kind === "delete-job")) {
      const key = claimKey(claim.namespace, claim.type, claim.key);
      const held = claims.get(key);
      if (held?.jid !== meta.jid) continue; // already taken by a later job
      claims.delete(key);
      (released ??= []).push({ kind: "delete-idempotency", claim: held });
    }
  }
  return released ?? [];
}
