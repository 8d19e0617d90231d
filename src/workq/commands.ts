/**
 * Workq's commands (docs/workq-protocol.md) translated to Engine calls, and the engine's
 * answers to Workq's replies. A Workq client names a job by its own UUID: the job keeps it as
 * its idempotency key, claimed in the Workq door's own namespace for as long as the job lives
 * (SubmitInput.idempotencyForLifetime), and Engine.claimedJob finds the job again by it.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { Engine } from "../engine/engine.js";
import type { FailureReport } from "../engine/state-machine.js";
import { WorqError } from "../model/errors.js";
import type { JobMeta, JobView, SubmitInput } from "../model/job.js";
import { LIMITS } from "../model/limits.js";
import { priorityLevelOfWorkq, workqJobOf, workqJobText, workqTime } from "../formats/workq.js";
import type { Caller } from "../transport/auth/access-control.js";
import { leaseOneJob, waitForReady } from "../transport/one-job-lease.js";
import type { WorkqCommand } from "./framing.js";

/** The job type of jobs added over Workq (Workq jobs have only a name: the queue). */
const WORKQ_JOB_TYPE = "workq";

/** Workq's "unlimited" max-attempts (0, its default): the engine's unlimited, attempts until the job's ttl ends it. */
const WORKQ_UNLIMITED_ATTEMPTS = 0;

const MAX_TTR_MS = 86_400_000;
const MAX_TTL_MS = 2_592_000_000; // 30 days, as Workq's server allows
const MAX_WAIT_MS = 86_400_000;

/** What every connection of the Workq door shares. */
export interface WorkqDoor {
  engine: Engine;
  /** The lease id the door handed out last for a job, so complete/fail quote the lease they were given. */
  leases: Map<string, string>;
  startedAtMs: number;
  activeClients: () => number;
  nowMs: () => number;
  /** Throws (a ConnectError, RESOURCE_EXHAUSTED) when the caller is over its --submit-rate. */
  admitSubmits: (caller: Caller, jobs: number) => void | Promise<void>;
}

/** One connection's context: who acts (the Workq token's holder, or everyone without tokens) and when it went away. */
export interface WorkqConnection {
  caller: Caller;
  signal: AbortSignal;
  id: number;
}

const OK = Buffer.from("+OK\r\n");
const NOT_FOUND = Buffer.from("-NOT-FOUND\r\n");
const TIMEOUT = Buffer.from("-TIMEOUT\r\n");

/** A `-CLIENT-ERROR <text>` reply: the command is wrong and changed nothing. */
class ClientError extends Error {}

function clientError(text: string): never {
  throw new ClientError(text);
}

/** One reply line's text: a single line, whatever an engine message holds. */
function oneLine(text: string): string {
  return text.replace(/[\r\n]+/g, " ");
}

/** Runs one command; resolves to its whole reply. Never rejects. */
export async function runCommand(door: WorkqDoor, conn: WorkqConnection, command: WorkqCommand): Promise<Buffer> {
  try {
    const handler = HANDLERS[command.name];
    if (!handler) clientError("Unknown command");
    allow(conn.caller, command.name);
    return await handler(door, conn, command);
  } catch (error) {
    if (error instanceof ConnectError && error.code === Code.ResourceExhausted) {
      return Buffer.from(`-CLIENT-ERROR ${oneLine(error.rawMessage)}\r\n`);
    }
    if (error instanceof ClientError) return Buffer.from(`-CLIENT-ERROR ${oneLine(error.message)}\r\n`);
    if (error instanceof WorqError) {
      switch (error.code) {
        case "WORQ_NOT_FOUND":
          return NOT_FOUND;
        case "WORQ_INVALID_ARGUMENT":
        case "WORQ_TOO_LARGE":
        case "WORQ_PERMISSION_DENIED":
        case "WORQ_FAILED_PRECONDITION":
        case "WORQ_UNIMPLEMENTED":
          return Buffer.from(`-CLIENT-ERROR ${oneLine(error.message)}\r\n`);
        default:
          return Buffer.from(`-SERVER-ERROR ${oneLine(error.message)}\r\n`);
      }
    }
    return Buffer.from(`-SERVER-ERROR ${oneLine(error instanceof Error ? error.message : String(error))}\r\n`);
  }
}

type Handler = (door: WorkqDoor, conn: WorkqConnection, command: WorkqCommand) => Promise<Buffer>;

const HANDLERS: Record<string, Handler> = {
  add: (door, conn, command) => addJob(door, conn, command, false),
  schedule: (door, conn, command) => addJob(door, conn, command, true),
  run: runJob,
  result: resultOf,
  lease,
  complete: (door, conn, command) => finish(door, conn, command, true),
  fail: (door, conn, command) => finish(door, conn, command, false),
  delete: deleteJob,
  inspect,
  wait: waitReady,
};

/** Who may send which command when the server has tokens: the roles of the matching gRPC calls. */
const ROLES: Record<string, readonly string[]> = {
  add: ["producer", "admin"],
  schedule: ["producer", "admin"],
  run: ["producer", "admin"],
  result: ["producer", "admin"],
  lease: ["worker", "admin"],
  complete: ["worker", "admin"],
  fail: ["worker", "admin"],
  delete: ["admin"],
  inspect: ["admin"],
  wait: ["worker", "admin"],
};

function allow(caller: Caller, name: string): void {
  if (caller.role === "anonymous" || ROLES[name]!.includes(caller.role)) return;
  clientError(`the Workq port's ${caller.role} token "${caller.name}" may not send ${name} (needs ${ROLES[name]!.join(" or ")})`);
}

function inScope(conn: WorkqConnection, queue: string): void {
  if (!conn.caller.scope.allows(queue)) {
    clientError(`the queue ${queue} is outside the Workq port token's queues (${conn.caller.scope.text})`);
  }
}

/** The idempotency namespace of Workq ids: the door's own, per token scope (as the gRPC door keeps scopes apart). */
function namespaceOf(conn: WorkqConnection): string {
  return `workq:${conn.caller.scope.text}`;
}

// ---- argument grammar ----

function parseId(text: string): string {
  if (!/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/.test(text)) clientError("Invalid ID");
  return text.toLowerCase();
}

function parseName(text: string): string {
  if (text.length > LIMITS.queueMaxChars || !LIMITS.queuePattern.test(text)) clientError("Invalid Name");
  return text;
}

/** A decimal integer from `min` to `max`, else the error `error`. */
function parseInteger(text: string, min: number, max: number, error: string): number {
  if (!/^-?\d{1,20}$/.test(text)) clientError(error);
  const value = Number(text);
  if (!(value >= min && value <= max)) clientError(error);
  return value;
}

function parseTime(text: string): number {
  if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$/.test(text)) clientError("Invalid Time");
  const ms = Date.parse(text);
  if (!Number.isFinite(ms)) clientError("Invalid Time");
  return ms;
}

function noFlags(command: WorkqCommand): void {
  if (command.flags.size > 0 || command.badFlags) clientError("Invalid command args");
}

/** The job a Workq id names: the job that claimed it, or (for jobs from other doors) the job with that jid. */
function jidOf(door: WorkqDoor, conn: WorkqConnection, id: string): string {
  return door.engine.claimedJob(namespaceOf(conn), WORKQ_JOB_TYPE, id) ?? id;
}

/** The id Workq shows for a job: the Workq id it was added with, else its jid. */
function workqIdOf(meta: JobMeta): string {
  return meta.type === WORKQ_JOB_TYPE && meta.idempotencyKey !== undefined ? meta.idempotencyKey : meta.jid;
}

async function getVisible(door: WorkqDoor, conn: WorkqConnection, jid: string): Promise<JobView> {
  const view = await door.engine.getJob(jid);
  // A job outside the token's queues is, to this caller, not there.
  if (!conn.caller.scope.allows(view.meta.queue)) throw new WorqError("WORQ_NOT_FOUND", "not found");
  return view;
}

// ---- commands ----

async function addJob(door: WorkqDoor, conn: WorkqConnection, command: WorkqCommand, scheduled: boolean): Promise<Buffer> {
  const [idText, nameText, ttrText, ttlText, ...rest] = command.args;
  const timeText = scheduled ? rest[0]! : undefined;
  if (command.badFlags) clientError("Invalid command flags");
  if (command.flags.size > 3) clientError("Invalid command args");
  const id = parseId(idText!);
  const name = parseName(nameText!);
  const ttr = parseInteger(ttrText!, 1, MAX_TTR_MS, "Invalid TTR");
  // The engine keeps a job at least a second.
  const ttl = parseInteger(ttlText!, LIMITS.minTtlMs, MAX_TTL_MS, "Invalid TTL");
  const flag = (key: string, min: number, max: number, error: string) => {
    const text = command.flags.get(key);
    return text === undefined ? undefined : parseInteger(text, min, max, error);
  };
  const priority = flag("priority", -2_147_483_648, 2_147_483_647, "Invalid Priority") ?? 0;
  const maxAttempts = flag("max-attempts", 0, 255, "Invalid Max Attempts") ?? 0;
  const maxFails = flag("max-fails", 0, 255, "Invalid Max Fails") ?? 0;
  const atMs = timeText === undefined ? undefined : parseTime(timeText);
  if (atMs !== undefined && atMs + ttl <= door.nowMs()) clientError("Invalid Time");
  inScope(conn, name);
  const base = jobInput(conn, id, name, ttr, priority, command.block!);
  const input: SubmitInput = {
    ...base,
    tags: { ...base.tags, [`${TAG_PREFIX}max-attempts`]: String(maxAttempts), [`${TAG_PREFIX}max-fails`]: String(maxFails) },
    ttlMs: ttl,
    ...(atMs !== undefined && atMs > door.nowMs() && { atMs }),
    retry: {
      ...IMMEDIATE_RETRY,
      maxAttempts: maxAttempts === 0 ? WORKQ_UNLIMITED_ATTEMPTS : maxAttempts,
      // Workq's own server ends a job at its first fail; max-fails lets it fail that often.
      maxFails: maxFails === 0 ? 1 : maxFails,
    },
  };
  await door.admitSubmits(conn.caller, 1);
  const [result] = await door.engine.submit([input], () => "job");
  if (result!.duplicate) clientError("Duplicate job");
  return OK;
}

/** A Workq job is requeued at once after a timeout or a fail it may retry. */
const IMMEDIATE_RETRY = { backoff: "CONSTANT", initialDelayMs: 0, maxDelayMs: 0, jitter: false } as const;

function jobInput(conn: WorkqConnection, id: string, name: string, ttr: number, priority: number, payload: Buffer): SubmitInput {
  return {
    type: WORKQ_JOB_TYPE,
    queue: name,
    payload,
    priority: priorityLevelOfWorkq(priority),
    reserveForMs: ttr,
    executionTimeoutMs: ttr,
    idempotencyKey: id,
    idempotencyNamespace: namespaceOf(conn),
    idempotencyForLifetime: true,
    // The engine has five priority levels: the tag keeps the Workq priority for inspect.
    tags: { [`${TAG_PREFIX}priority`]: String(priority) },
  };
}

/** Tags `workq.<key>` keep what a Workq job was added with, where the engine's form differs (inspect shows them). */
const TAG_PREFIX = "workq.";

async function runJob(door: WorkqDoor, conn: WorkqConnection, command: WorkqCommand): Promise<Buffer> {
  const [idText, nameText, ttrText, waitText] = command.args;
  if (command.badFlags) clientError("Invalid command flags");
  if (command.flags.size > 1) clientError("Invalid command args");
  const id = parseId(idText!);
  const name = parseName(nameText!);
  const ttr = parseInteger(ttrText!, 1, MAX_TTR_MS, "Invalid TTR");
  const waitMs = parseInteger(waitText!, 0, MAX_WAIT_MS, "Invalid wait timeout");
  const priorityText = command.flags.get("priority");
  const priority = priorityText === undefined ? 0 : parseInteger(priorityText, -2_147_483_648, 2_147_483_647, "Invalid Priority");
  inScope(conn, name);
  const input: SubmitInput = {
    ...jobInput(conn, id, name, ttr, priority, command.block!),
    retry: { ...IMMEDIATE_RETRY, maxAttempts: WORKQ_UNLIMITED_ATTEMPTS, maxFails: 1 },
  };
  await door.admitSubmits(conn.caller, 1);
  const [result] = await door.engine.submit([input], () => "job");
  if (result!.duplicate) clientError("Duplicate job");
  const jid = result!.jid;
  // A run job lives only as long as its run command: it is deleted however the wait ends.
  try {
    const view = await door.engine.waitFinished(jid, waitMs, conn.signal, true);
    return resultReply(id, view);
  } catch (error) {
    if (error instanceof WorqError && error.code === "WORQ_DEADLINE_EXCEEDED") return TIMEOUT;
    throw error;
  } finally {
    door.leases.delete(jid);
    await door.engine.deleteJob(jid).catch(() => {});
  }
}

/** `+OK 1`, then `<id> <1|0> <size>` and the result bytes. */
function resultReply(id: string, view: JobView): Buffer {
  const success = view.meta.state === "COMPLETED";
  const bytes = success ? (view.result ?? new Uint8Array()) : failResultOf(view);
  return Buffer.concat([Buffer.from(`+OK 1\r\n${id} ${success ? 1 : 0} ${bytes.byteLength}\r\n`), bytes, Buffer.from("\r\n")]);
}

/** The result a worker's `fail` gave (stored with the job like an ack's), for result and run replies. */
function failResultOf(view: JobView): Uint8Array {
  return view.result ?? new Uint8Array();
}

/** What a Workq `fail` reports to the engine: its result block is stored with the job. */
function failReportOf(result: Buffer): FailureReport {
  return { message: "failed by a Workq worker", errtype: "WorkqFail", backtrace: [], category: "TEMPORARY", result };
}

async function resultOf(door: WorkqDoor, conn: WorkqConnection, command: WorkqCommand): Promise<Buffer> {
  noFlags(command);
  if (command.args.length !== 2) clientError("Invalid command args");
  const id = parseId(command.args[0]!);
  const waitMs = parseInteger(command.args[1]!, 0, MAX_WAIT_MS, "Invalid wait timeout");
  const jid = jidOf(door, conn, id);
  await getVisible(door, conn, jid);
  try {
    return resultReply(id, await door.engine.waitFinished(jid, waitMs, conn.signal));
  } catch (error) {
    if (error instanceof WorqError && error.code === "WORQ_DEADLINE_EXCEEDED") return TIMEOUT;
    throw error;
  }
}

let leaseSeq = 0;
/** The worker id of a Workq lease session: `workq:<connection>:<lease>` (the dashboard lists it while it waits). */
const WORKQ_WORKER_PREFIX = "workq:";

/** `<queue>... <wait-timeout>`, as lease and wait take them: the queues (each checked, in the token's queues) and the wait. */
function queuesAndWait(conn: WorkqConnection, command: WorkqCommand, maxWaitMs: number): { names: string[]; waitMs: number } {
  noFlags(command);
  if (command.args.length < 2) clientError("Invalid command args");
  const waitMs = parseInteger(command.args.at(-1)!, 0, maxWaitMs, "Invalid wait timeout");
  const names = command.args.slice(0, -1).map(parseName);
  if (names.length > LIMITS.leaseMaxQueues) clientError("Invalid command args");
  for (const name of names) inScope(conn, name);
  return { names, waitMs };
}

async function lease(door: WorkqDoor, conn: WorkqConnection, command: WorkqCommand): Promise<Buffer> {
  const { names, waitMs } = queuesAndWait(conn, command, MAX_WAIT_MS);
  const granted = await leaseOne(door, conn, names, waitMs);
  if (!granted) return TIMEOUT;
  const { meta, body } = granted;
  const id = workqIdOf(meta);
  door.leases.set(meta.jid, meta.lease!.leaseId);
  return Buffer.concat([
    Buffer.from(`+OK 1\r\n${id} ${meta.queue} ${meta.reserveForMs} ${body.payload.byteLength}\r\n`),
    body.payload,
    Buffer.from("\r\n"),
  ]);
}

/**
 * One job of `queues` (a queue picked uniformly among those with a ready job), waiting up to
 * `waitMs`. Closing the one-job session caps its job's lease at the orphan grace, so the
 * lease is then renewed to the job's full ttr (Workq's lease outlives the command). A job
 * handed to the session in the moment it closes is not lost: it is an orphan whose lease
 * lapses after the grace, and it is leased again.
 */
async function leaseOne(door: WorkqDoor, conn: WorkqConnection, queues: string[], waitMs: number) {
  const workerId = `${WORKQ_WORKER_PREFIX}${conn.id}:${++leaseSeq}`;
  // A wait-timeout of 0 is a poll: a job only if one was ready as it asked.
  const grant = await leaseOneJob(door.engine, { queues, workerId, order: "RANDOM" }, waitMs, conn.signal);
  if (!grant) return undefined;
  const expiresAtMs = await door.engine.renew(grant.meta.jid, grant.meta.lease!.leaseId);
  return { ...grant, meta: { ...grant.meta, lease: { ...grant.meta.lease!, expiresAtMs } } };
}

/** The longest `wait`, in ms. */
const MAX_READY_WAIT_MS = 60_000;

/**
 * wait <queue>... <wait-timeout> (Worq's own): +OK once a job of the queues is ready, taking
 * none; -TIMEOUT after the wait. A node whose lease spans several engines polls each (`lease
 * ... 0`), then waits on all of them and polls again the first that says so: no job is ever
 * taken that the client does not get.
 */
async function waitReady(door: WorkqDoor, conn: WorkqConnection, command: WorkqCommand): Promise<Buffer> {
  const { names, waitMs } = queuesAndWait(conn, command, MAX_READY_WAIT_MS);
  const workerId = `${WORKQ_WORKER_PREFIX}${conn.id}:wait`;
  return (await waitForReady(door.engine, { queues: names, workerId }, waitMs, conn.signal)) ? OK : TIMEOUT;
}

async function finish(door: WorkqDoor, conn: WorkqConnection, command: WorkqCommand, success: boolean): Promise<Buffer> {
  if (command.badFlags || command.flags.size > 0) clientError("Invalid command args");
  const id = parseId(command.args[0]!);
  const jid = jidOf(door, conn, id);
  const { meta } = await getVisible(door, conn, jid);
  if (meta.state === "COMPLETED" || meta.state === "FAILED" || meta.state === "DEAD_LETTER" || meta.state === "CANCELLED") {
    clientError("Duplicate result");
  }
  // The lease this port handed out; after a restart, the job's lease if a Workq lease holds it
  // (never a gRPC worker's).
  const leaseId = door.leases.get(jid) ?? (meta.lease?.workerId.startsWith(WORKQ_WORKER_PREFIX) ? meta.lease.leaseId : undefined);
  if (meta.state !== "RUNNING" || leaseId === undefined) clientError("Lease expired");
  try {
    if (success) await door.engine.ack(jid, leaseId, command.block!);
    else await door.engine.fail(jid, leaseId, failReportOf(command.block!));
  } catch (error) {
    if (error instanceof WorqError && error.code === "WORQ_LEASE_NOT_HELD") clientError("Lease expired");
    throw error;
  }
  door.leases.delete(jid);
  return OK;
}

async function deleteJob(door: WorkqDoor, conn: WorkqConnection, command: WorkqCommand): Promise<Buffer> {
  noFlags(command);
  if (command.args.length !== 1) clientError("Invalid command args");
  const jid = jidOf(door, conn, parseId(command.args[0]!));
  await getVisible(door, conn, jid);
  await door.engine.deleteJob(jid);
  door.leases.delete(jid);
  return OK;
}

// ---- inspect ----

async function inspect(door: WorkqDoor, conn: WorkqConnection, command: WorkqCommand): Promise<Buffer> {
  noFlags(command);
  const [object, ...args] = command.args;
  switch (object) {
    case "server": {
      if (args.length !== 0) clientError("Invalid command args");
      return Buffer.from(
        `+OK 1\r\nserver 3\r\nactive-clients ${door.activeClients()}\r\nevicted-jobs ${door.engine.info().counters.evicted}\r\nstarted ${workqTime(door.startedAtMs)}\r\n`,
      );
    }
    case "queues": {
      if (args.length !== 2) clientError("Invalid command args");
      const offset = parseInteger(args[0]!, 0, 4_294_967_295, "Invalid cursor offset");
      const limit = parseInteger(args[1]!, 1, 100, "Invalid limit");
      const names: string[] = [];
      let token = "";
      do {
        const page = door.engine.listQueues(1000, token, (queue) => conn.caller.scope.allows(queue));
        names.push(...page.queues.map((queue) => queue.queue));
        token = page.nextPageToken;
      } while (token !== "" && names.length < offset + limit);
      const shown = names.slice(offset, offset + limit);
      return Buffer.from(`+OK ${shown.length}\r\n${shown.map((name) => queueBlock(door, name)).join("")}`);
    }
    case "queue": {
      if (args.length !== 1) clientError("Invalid command args");
      const name = parseName(args[0]!);
      if (!conn.caller.scope.allows(name) || !queueExists(door, name)) return NOT_FOUND;
      return Buffer.from(`+OK 1\r\n${queueBlock(door, name)}`);
    }
    case "jobs":
    case "scheduled-jobs": {
      if (args.length !== 3) clientError("Invalid command args");
      const name = parseName(args[0]!);
      const offset = parseInteger(args[1]!, 0, 4_294_967_295, "Invalid cursor offset");
      const limit = parseInteger(args[2]!, 1, 100, "Invalid limit");
      if (!conn.caller.scope.allows(name) || !queueExists(door, name)) return NOT_FOUND;
      const jobs = await jobsOf(door, name, object === "jobs" ? "SCHEDULED" : "DELAYED", offset + limit);
      const shown = jobs.slice(offset, offset + limit);
      return Buffer.concat([Buffer.from(`+OK ${shown.length}\r\n`), ...shown.map(jobBlock)]);
    }
    case "job": {
      if (args.length !== 1) clientError("Invalid command args");
      const view = await getVisible(door, conn, jidOf(door, conn, parseId(args[0]!)));
      return Buffer.concat([Buffer.from("+OK 1\r\n"), jobBlock(view)]);
    }
    default:
      return clientError("Unknown command");
  }
}

function queueExists(door: WorkqDoor, name: string): boolean {
  return door.engine.listQueues(1, "", (queue) => queue === name).queues.length > 0;
}

function queueBlock(door: WorkqDoor, name: string): string {
  const stats = door.engine.queueStats(name);
  return `${name} 2\r\nready-len ${stats.ready}\r\nscheduled-len ${stats.delayed}\r\n`;
}

/** Up to `count` jobs of a queue in one state, oldest pages first. */
async function jobsOf(door: WorkqDoor, queue: string, state: "SCHEDULED" | "DELAYED", count: number): Promise<JobView[]> {
  const jobs: JobView[] = [];
  let pageToken = "";
  do {
    const page = await door.engine.listJobs({ queue, state, pageSize: Math.min(100, count - jobs.length), pageToken });
    jobs.push(...page.jobs);
    pageToken = page.nextPageToken;
  } while (pageToken !== "" && jobs.length < count);
  return jobs;
}

/**
 * A job as inspect shows it. A job added over Workq shows the values it was added with (its
 * tags keep them): its own priority, max-attempts 0 for unlimited, its max-fails.
 */
function jobBlock(view: JobView): Buffer {
  const job = workqJobOf(view);
  if (view.meta.type === WORKQ_JOB_TYPE) {
    job.keys = job.keys.map(([key, value]) => [key, view.body.tags[`${TAG_PREFIX}${key}`] ?? value]);
  }
  return workqJobText({ ...job, id: workqIdOf(view.meta) });
}
