/**
 * Faktory's job commands (docs/faktory-protocol.md) translated to Engine calls: PUSH and
 * PUSHB submit (answered once durable), FETCH leases one job of the listed queues in order
 * (waiting up to 2 s), ACK and FAIL report it, BEAT keeps a worker alive and tells it to go
 * quiet or terminate. The operator's commands (INFO, FLUSH, QUEUE, MUTATE) are in
 * admin-commands.ts. A job keeps the jid its producer gave it as its idempotency key, claimed
 * in the door's own namespace for as long as the job lives, so a report or a later session
 * finds it by that name.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { WorqError } from "../model/errors.js";
import type { JobView, SubmitInput } from "../model/job.js";
import { isUuidV4 } from "../model/limits.js";
import type { Caller } from "../transport/auth/access-control.js";
import { leaseOneJob, waitForReady } from "../transport/one-job-lease.js";
import { ADMIN_HANDLERS, ADMIN_ROLES } from "./admin-commands.js";
import { bulk, errorReply, namespaceOf, NULL_BULK, OK, type FaktoryConnection, type FaktoryDoor, type FaktoryHandler } from "./door.js";
import {
  FAKTORY_ID_TYPE,
  FAKTORY_QUEUE_NAME,
  MAX_BACKTRACE_LINES,
  FaktoryError,
  faktoryJidOf,
  faktoryJobText,
  faktoryRetryDelayMs,
  submitInputOfFaktory,
} from "./payload.js";
import { FAKTORY_WORKER_PREFIX, type FaktoryWorkerState } from "./workers.js";

/** How long FETCH waits for a job before answering none (clients ask again at once; Go's client reads with a 5 s deadline). */
const FETCH_WAIT_MS = 2000;
/** The most jobs one PUSHB takes. */
const MAX_PUSHB_JOBS = 10_000;
/** Failure texts as Faktory keeps them. */
const MAX_ERRTYPE_CHARS = 100;
const MAX_MESSAGE_CHARS = 1000;

const JOB_HANDLERS: Record<string, FaktoryHandler> = {
  PUSH: push,
  PUSHB: pushBatch,
  FETCH: (door, conn, argText) => fetch(door, conn, argText, FETCH_WAIT_MS),
  ACK: ack,
  FAIL: fail,
  BEAT: beat,
  TAKE: (door, conn, argText) => fetch(door, conn, argText, 0),
  WAIT: waitReady,
};

const JOB_ROLES: Record<string, readonly string[]> = {
  PUSH: ["producer", "admin"],
  PUSHB: ["producer", "admin"],
  FETCH: ["worker", "admin"],
  ACK: ["worker", "admin"],
  FAIL: ["worker", "admin"],
  BEAT: ["worker", "admin"],
  TAKE: ["worker", "admin"],
  WAIT: ["worker", "admin"],
};

/** Runs one command line (after the handshake); resolves to its whole reply. Never rejects. */
export async function runCommand(door: FaktoryDoor, conn: FaktoryConnection, verb: string, argText: string): Promise<Buffer> {
  door.commandCount++;
  try {
    const handler = JOB_HANDLERS[verb] ?? ADMIN_HANDLERS[verb];
    if (!handler) return errorReply(`unknown command ${verb}`);
    allow(conn.caller, verb, JOB_ROLES[verb] ?? ADMIN_ROLES[verb]);
    return await handler(door, conn, argText);
  } catch (error) {
    return errorReply(messageOf(error));
  }
}

/** An error's text as the reply says it. */
export function messageOf(error: unknown): string {
  if (error instanceof FaktoryError) return error.message;
  if (error instanceof ConnectError && error.code === Code.ResourceExhausted) return error.rawMessage;
  if (error instanceof WorqError) return error.message;
  return `internal error: ${error instanceof Error ? error.message : String(error)}`;
}

/** Whether `caller` may send `verb` (its token's role). */
export function mayRun(caller: Caller, verb: string): boolean {
  const roles = JOB_ROLES[verb] ?? ADMIN_ROLES[verb];
  return caller.role === "anonymous" || roles === undefined || roles.includes(caller.role);
}

function allow(caller: Caller, verb: string, roles: readonly string[] | undefined): void {
  if (caller.role === "anonymous" || roles === undefined || roles.includes(caller.role)) return;
  throw new FaktoryError(`the ${caller.role} token "${caller.name}" may not send ${verb} (needs ${roles.join(" or ")})`);
}

function inScope(conn: FaktoryConnection, queue: string): void {
  if (!conn.caller.scope.allows(queue)) {
    throw new FaktoryError(`the queue ${queue} is outside the token's queues (${conn.caller.scope.text})`);
  }
}

export function parseJson(argText: string): unknown {
  try {
    return JSON.parse(argText);
  } catch (error) {
    throw new FaktoryError(`invalid JSON: ${(error as Error).message}`);
  }
}

function inputOf(conn: FaktoryConnection, json: unknown): SubmitInput {
  const input = submitInputOfFaktory(json);
  inScope(conn, input.queue ?? "default");
  return { ...input, idempotencyNamespace: namespaceOf(conn), idempotencyForLifetime: true };
}

async function push(door: FaktoryDoor, conn: FaktoryConnection, argText: string): Promise<Buffer> {
  const input = inputOf(conn, parseJson(argText));
  await door.admitSubmits(conn.caller, 1);
  // A jid pushed again names the job it already names: answered OK, nothing changes.
  await door.engine.submit([input], () => "job");
  return OK;
}

/** PUSHB: each job on its own; the reply maps each refused job's jid to why (`{}` when all are in). */
async function pushBatch(door: FaktoryDoor, conn: FaktoryConnection, argText: string): Promise<Buffer> {
  const jobs = parseJson(argText);
  if (!Array.isArray(jobs)) throw new FaktoryError("invalid JSON: PUSHB takes a JSON array of jobs");
  if (jobs.length > MAX_PUSHB_JOBS) throw new FaktoryError(`PUSHB takes at most ${MAX_PUSHB_JOBS} jobs`);
  const refused: Record<string, string> = {};
  const accepted: { jid: string; input: SubmitInput }[] = [];
  for (const job of jobs) {
    const jid =
      typeof job === "object" && job !== null && typeof (job as { jid?: unknown }).jid === "string" ? (job as { jid: string }).jid : "";
    try {
      accepted.push({ jid, input: inputOf(conn, job) });
    } catch (error) {
      refused[jid] = messageOf(error);
    }
  }
  if (accepted.length > 0) {
    await door.admitSubmits(conn.caller, accepted.length);
    // One commit for the batch; a job the engine refuses is tried alone so the others still go in.
    try {
      await door.engine.submit(
        accepted.map((job) => job.input),
        (i) => `jobs[${i}]`,
      );
    } catch (error) {
      if (!(error instanceof WorqError) || error.code !== "WORQ_INVALID_ARGUMENT") throw error;
      for (const job of accepted) {
        try {
          await door.engine.submit([job.input], () => "job");
        } catch (jobError) {
          refused[job.jid] = messageOf(jobError);
        }
      }
    }
  }
  return bulk(JSON.stringify(refused));
}

let fetchSeq = 0;

/**
 * FETCH q1 q2 …: the first ready job of the queues in the order listed, or none after `waitMs`.
 * TAKE (Worq's own) is FETCH answered at once: what a node that routes to several engines asks
 * each engine in turn (see waitReady).
 */
async function fetch(door: FaktoryDoor, conn: FaktoryConnection, argText: string, waitMs: number): Promise<Buffer> {
  const queues = fetchQueues(conn, argText.split(" "));
  const worker = conn.wid === "" ? undefined : door.workers.get(conn.wid);
  if (worker) worker.queues = queues;
  // A quiet or terminated worker gets no more jobs; it is told so by its next BEAT.
  if (worker && worker.state !== "running") {
    await sleep(waitMs, conn.signal);
    return NULL_BULK;
  }
  const grant = await leaseOne(door, conn, queues, waitMs);
  if (!grant) return NULL_BULK;
  const wireJid = faktoryJidOf(grant.meta);
  // Reservations never reported (lapsed) are forgotten oldest first; a report still finds its
  // job by its jid and the lease's Faktory worker id.
  door.reservations.set(wireJid, { jid: grant.meta.jid, leaseId: grant.meta.lease!.leaseId, wid: conn.wid });
  return bulk(faktoryJobText(grant));
}

/** The queues a FETCH names (`default` when none), each checked against Faktory's rule and the token's scope. */
function fetchQueues(conn: FaktoryConnection, names: string[]): string[] {
  const queues = names.filter((name) => name !== "");
  if (queues.length === 0) queues.push("default");
  for (const queue of queues) {
    if (!FAKTORY_QUEUE_NAME.test(queue)) {
      throw new FaktoryError(`cannot get "${queue}" queue: queue names must match \\A[a-zA-Z0-9._-]+\\z`);
    }
    inScope(conn, queue);
  }
  return queues;
}

/**
 * WAIT <ms> q1 q2 … (Worq's own): +OK once a job of the queues is ready, taking none; none
 * after `ms` (at most FETCH_WAIT_MS). A node whose FETCH spans several engines TAKEs from each
 * in the order of the queues, then WAITs on all of them and TAKEs again from the first that
 * says so: no job is ever taken that the worker does not get.
 */
async function waitReady(door: FaktoryDoor, conn: FaktoryConnection, argText: string): Promise<Buffer> {
  const [msText = "", ...names] = argText.split(" ");
  const ms = /^[0-9]{1,5}$/.test(msText) ? Number(msText) : Number.NaN;
  if (!(ms <= FETCH_WAIT_MS)) throw new FaktoryError(`invalid WAIT: the wait must be 0 to ${FETCH_WAIT_MS} ms, got ${msText.slice(0, 20)}`);
  const queues = fetchQueues(conn, names);
  const worker = conn.wid === "" ? undefined : door.workers.get(conn.wid);
  if (worker && worker.state !== "running") {
    await sleep(ms, conn.signal);
    return NULL_BULK;
  }
  const workerId = `${FAKTORY_WORKER_PREFIX}${conn.wid || `connection-${conn.id}`}:wait`;
  return (await waitForReady(door.engine, { queues, workerId }, ms, conn.signal)) ? OK : NULL_BULK;
}

/**
 * One job of `queues` within `waitMs`. Its lease is detached: a Faktory reservation is
 * not tied to the connection, so the job stays reserved for its whole `reserve_for` when the
 * one-job session closes, and across a restart.
 */
async function leaseOne(door: FaktoryDoor, conn: FaktoryConnection, queues: string[], waitMs: number): Promise<JobView | undefined> {
  const workerId = `${FAKTORY_WORKER_PREFIX}${conn.wid || `connection-${conn.id}`}:${++fetchSeq}`;
  const grant = await leaseOneJob(door.engine, { queues, workerId, detached: true }, waitMs, conn.signal);
  return grant && { meta: grant.meta, body: grant.body };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done);
  });
}

/** The job and lease a report names: the reservation this door handed out, else (after a restart) the job's Faktory lease. */
async function reservedJob(door: FaktoryDoor, conn: FaktoryConnection, wireJid: string) {
  const reservation = door.reservations.get(wireJid);
  const jid =
    reservation?.jid ?? door.engine.claimedJob(namespaceOf(conn), FAKTORY_ID_TYPE, wireJid) ?? (isUuidV4(wireJid) ? wireJid : undefined);
  if (jid === undefined) return undefined;
  let view: JobView;
  try {
    view = await door.engine.getJob(jid);
  } catch (error) {
    if (error instanceof WorqError && error.code === "WORQ_NOT_FOUND") return undefined;
    throw error;
  }
  if (!conn.caller.scope.allows(view.meta.queue)) return undefined;
  const lease = view.meta.lease;
  const leaseId =
    view.meta.state !== "RUNNING" || !lease
      ? undefined
      : reservation && reservation.leaseId === lease.leaseId
        ? reservation.leaseId
        : lease.workerId.startsWith(FAKTORY_WORKER_PREFIX)
          ? lease.leaseId
          : undefined;
  return { view, leaseId };
}

export function reportOf(argText: string, verb: "ACK" | "FAIL" | "BEAT"): Record<string, unknown> {
  let json: unknown;
  try {
    json = JSON.parse(argText);
  } catch {
    throw new FaktoryError(`invalid ${verb} ${argText}`);
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw new FaktoryError(`invalid ${verb} ${argText}`);
  return json as Record<string, unknown>;
}

/** ACK: the job is done. An ACK for a job not (or no longer) reserved changes nothing and is answered OK, as Faktory does. */
async function ack(door: FaktoryDoor, conn: FaktoryConnection, argText: string): Promise<Buffer> {
  const report = reportOf(argText, "ACK");
  if (typeof report.jid !== "string") throw new FaktoryError(`invalid ACK ${argText}`);
  if (report.jid === "") throw new FaktoryError("missing JID");
  const reserved = await reservedJob(door, conn, report.jid);
  if (reserved?.leaseId !== undefined) {
    try {
      await door.engine.ack(reserved.view.meta.jid, reserved.leaseId, new Uint8Array());
    } catch (error) {
      if (!(error instanceof WorqError && error.code === "WORQ_LEASE_NOT_HELD")) throw error;
    }
  }
  door.reservations.delete(report.jid);
  return OK;
}

/**
 * FAIL: the attempt failed; the job is retried after Faktory's backoff while its `retry`
 * allows, then goes to the dead letters (or is discarded with `retry: 0`). A FAIL for a job
 * reserved no more (its reservation lapsed, or it was reported) changes nothing and is
 * answered OK; one for a job that does not exist is refused.
 */
async function fail(door: FaktoryDoor, conn: FaktoryConnection, argText: string): Promise<Buffer> {
  const report = reportOf(argText, "FAIL");
  const { jid: wireJid, errtype, message, backtrace } = report;
  if (wireJid !== undefined && typeof wireJid !== "string") throw new FaktoryError(`invalid FAIL ${argText}`);
  if (errtype !== undefined && errtype !== null && typeof errtype !== "string") throw new FaktoryError(`invalid FAIL ${argText}`);
  if (message !== undefined && message !== null && typeof message !== "string") throw new FaktoryError(`invalid FAIL ${argText}`);
  if (backtrace !== undefined && backtrace !== null && (!Array.isArray(backtrace) || backtrace.some((line) => typeof line !== "string"))) {
    throw new FaktoryError(`invalid FAIL ${argText}`);
  }
  if (!wireJid) throw new FaktoryError("missing JID");
  const reserved = await reservedJob(door, conn, wireJid);
  if (!reserved) throw new FaktoryError(`Job not found ${wireJid}`);
  if (reserved.leaseId !== undefined) {
    const failures = (reserved.view.meta.failure?.retryCount ?? 0) + 1;
    try {
      await door.engine.fail(reserved.view.meta.jid, reserved.leaseId, {
        errtype: failureText(errtype, MAX_ERRTYPE_CHARS),
        message: failureText(message, MAX_MESSAGE_CHARS),
        backtrace: ((backtrace as string[] | undefined) ?? []).slice(0, MAX_BACKTRACE_LINES),
        category: "TEMPORARY",
        retryAfterMs: faktoryRetryDelayMs(failures, Math.random),
      });
    } catch (error) {
      if (!(error instanceof WorqError && error.code === "WORQ_LEASE_NOT_HELD")) throw error;
    }
  }
  door.reservations.delete(wireJid);
  return OK;
}

function failureText(value: unknown, maxChars: number): string {
  const text = typeof value === "string" ? value.trim() : "";
  return text === "" ? "unknown" : text.slice(0, maxChars);
}

const STATES: readonly string[] = ["running", "quiet", "terminate"];

/** BEAT: the worker is alive; answered OK while it runs, else its state (quiet or terminate) on every beat. */
async function beat(door: FaktoryDoor, conn: FaktoryConnection, argText: string): Promise<Buffer> {
  const json = reportOf(argText, "BEAT");
  const { wid, current_state: state, rss_kb: rssKb } = json;
  if (typeof wid !== "string" || wid === "") throw new FaktoryError(`invalid BEAT ${argText}`);
  if (state !== undefined && state !== "" && (typeof state !== "string" || !STATES.includes(state))) {
    throw new FaktoryError(`invalid BEAT ${argText}`);
  }
  if (rssKb !== undefined && (typeof rssKb !== "number" || !Number.isInteger(rssKb))) throw new FaktoryError(`invalid BEAT ${argText}`);
  const worker = door.workers.get(wid);
  if (!worker) throw new FaktoryError(`unknown worker ${wid}`);
  door.workers.beat(worker, state === "" ? undefined : (state as FaktoryWorkerState | undefined), rssKb);
  return worker.state === "running" ? OK : bulk(JSON.stringify({ state: worker.state }));
}
