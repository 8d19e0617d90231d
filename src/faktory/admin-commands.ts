/**
 * Faktory's operator commands (docs/faktory-protocol.md, "Operator commands") translated to
 * Engine calls: INFO (the server's figures over the caller's queues), FLUSH (every job of
 * those queues deleted), QUEUE PAUSE/RESUME/REMOVE/LATENCY and MUTATE (clear, kill, discard
 * or requeue the scheduled, retrying or dead jobs a filter matches); Enterprise's BATCH and
 * TRACK are refused as Faktory's open-source server refuses them. Every change is answered
 * once it is durable.
 */
import { WorqError } from "../model/errors.js";
import type { JobState, JobView } from "../model/job.js";
import type { QueueStatsView } from "../engine/engine.js";
import { bulk, OK, type FaktoryConnection, type FaktoryDoor, type FaktoryHandler } from "./door.js";
import { FaktoryError, faktoryJidOf, faktoryJobOf } from "./payload.js";

/** The Faktory protocol level this port emulates, as INFO reports it (clients check it is semver). */
const FAKTORY_VERSION = "1.9.4";
/** Jobs listed per engine call while MUTATE or FLUSH walks a set. */
const PAGE = 1000;
/** Jobs deleted at once (each delete is its own commit; the store groups those in flight). */
const DELETE_AT_ONCE = 100;
/** The longest MUTATE glob (`regexp`) taken. */
const MAX_GLOB_CHARS = 1000;

export const ADMIN_HANDLERS: Record<string, FaktoryHandler> = {
  INFO: info,
  FLUSH: flush,
  QUEUE: queue,
  MUTATE: mutate,
  BATCH: () => Promise.reject(new FaktoryError("batch subsystem is only available in Faktory Enterprise")),
  TRACK: () => Promise.reject(new FaktoryError("tracking subsystem is only available in Faktory Enterprise")),
};

/** Who may send each command when the server has tokens (INFO, BATCH and TRACK: anyone). */
export const ADMIN_ROLES: Record<string, readonly string[]> = {
  FLUSH: ["admin"],
  QUEUE: ["admin"],
  MUTATE: ["admin"],
};

/** Every known queue the caller's token covers, with its figures, sorted by name. */
function queuesInScope(door: FaktoryDoor, conn: FaktoryConnection): QueueStatsView[] {
  const all: QueueStatsView[] = [];
  for (let token = ""; ;) {
    const page = door.engine.listQueues(PAGE, token, (name) => conn.caller.scope.allows(name));
    all.push(...page.queues);
    if (page.nextPageToken === "") return all;
    token = page.nextPageToken;
  }
}

/** INFO: Faktory's figures, counted over the queues the caller's token covers. */
async function info(door: FaktoryDoor, conn: FaktoryConnection): Promise<Buffer> {
  const nowMs = door.nowMs();
  const queues = queuesInScope(door, conn);
  const sum = (figure: (stats: QueueStatsView) => number) => queues.reduce((total, stats) => total + figure(stats), 0);
  const scheduled = sum((stats) => stats.delayed);
  const retries = sum((stats) => stats.retrying);
  const dead = sum((stats) => stats.dead);
  const working = sum((stats) => stats.inFlight);
  // The engine counts attempts server-wide: a token limited to some queues sees none of them.
  const counters = conn.caller.scope.all ? door.engine.info().counters : { processed: 0, failed: 0 };
  const task = (size: number) => ({ enqueued: 0, cycles: 0, size, wall_time_sec: 0 });
  const now = new Date(nowMs).toISOString();
  return bulk(
    JSON.stringify({
      now,
      server_utc_time: `${now.slice(11, 19)} UTC`,
      faktory: {
        queues: Object.fromEntries(queues.map((stats) => [stats.queue, stats.ready])),
        sets: { scheduled, retries, dead, working },
        // Faktory's background tasks (deprecated, but clients read the key): the sizes they look after.
        tasks: {
          Busy: { size: working, reaped: 0 },
          Workers: { size: door.workers.all().length, reaped: 0 },
          Scheduled: task(scheduled),
          Retries: task(retries),
          Dead: task(dead),
        },
        total_failures: counters.failed,
        total_processed: counters.processed + counters.failed,
        total_enqueued: sum((stats) => stats.ready),
        total_queues: queues.length,
      },
      server: {
        description: "Faktory",
        faktory_version: FAKTORY_VERSION,
        uptime: Math.max(0, Math.floor((nowMs - door.startedAtMs) / 1000)),
        connections: door.connections(),
        command_count: door.commandCount,
        used_memory_mb: Math.round(process.memoryUsage().rss / (1024 * 1024)),
      },
    }),
  );
}

/** States FLUSH deletes beyond what a queue's purge does (the waiting ones). */
const FLUSHED_STATES: readonly JobState[] = ["RUNNING", "DEAD_LETTER", "FAILED", "COMPLETED", "CANCELLED"];

/** FLUSH: every job of every queue the token covers is deleted, whatever its state, and paused queues resume. */
async function flush(door: FaktoryDoor, conn: FaktoryConnection): Promise<Buffer> {
  for (const stats of queuesInScope(door, conn)) await removeQueue(door, stats, FLUSHED_STATES);
  return OK;
}

/** Deletes the queue's waiting jobs (purge) and its jobs in `states`, and lets it be fetched from again. */
async function removeQueue(door: FaktoryDoor, stats: QueueStatsView, states: readonly JobState[]): Promise<void> {
  await door.engine.purgeQueue(stats.queue);
  for (const state of states) {
    // Deleted jobs leave the listing: read its first page again until nothing is left (or nothing more goes).
    for (;;) {
      const { jobs } = await door.engine.listJobs({ queue: stats.queue, state, pageSize: PAGE });
      const deleted = await deleteJobs(
        door,
        jobs.map((view) => view.meta.jid),
      );
      if (jobs.length < PAGE || deleted === 0) break;
    }
  }
  if (stats.paused) await door.engine.resumeQueue(stats.queue);
}

/** Deletes the jobs (those gone meanwhile are skipped) and forgets their reservations; returns how many were deleted. */
async function deleteJobs(door: FaktoryDoor, jids: readonly string[]): Promise<number> {
  let deleted = 0;
  for (let start = 0; start < jids.length; start += DELETE_AT_ONCE) {
    const outcomes = await Promise.all(
      jids.slice(start, start + DELETE_AT_ONCE).map(async (jid) => {
        try {
          await door.engine.deleteJob(jid);
          return true;
        } catch (error) {
          if (error instanceof WorqError && error.code === "WORQ_NOT_FOUND") return false;
          throw error;
        }
      }),
    );
    deleted += outcomes.filter(Boolean).length;
  }
  const gone = new Set(jids);
  for (const [wireJid, reservation] of door.reservations) if (gone.has(reservation.jid)) door.reservations.delete(wireJid);
  return deleted;
}

const QUEUE_SUBCOMMANDS = ["PAUSE", "RESUME", "REMOVE", "LATENCY"];

/**
 * QUEUE PAUSE|RESUME|REMOVE <names…>|* and QUEUE LATENCY <names…>. Unknown names are
 * ignored (LATENCY: 0); `*` is every known queue the token covers; a name outside the
 * token's queues is refused and nothing changes.
 */
async function queue(door: FaktoryDoor, conn: FaktoryConnection, argText: string): Promise<Buffer> {
  const [given, ...names] = argText.split(" ").filter((word) => word !== "");
  if (given === undefined) throw new FaktoryError("QUEUE needs a subcommand: PAUSE, RESUME, REMOVE or LATENCY, then queue names or *");
  const sub = given.toUpperCase();
  if (!QUEUE_SUBCOMMANDS.includes(sub)) throw new FaktoryError(`no such QUEUE subcommand: ${given}`);
  if (names.length === 0) throw new FaktoryError(`QUEUE ${sub} needs queue names${sub === "LATENCY" ? "" : " or *"}`);
  if (sub === "LATENCY" && names.includes("*")) throw new FaktoryError("QUEUE LATENCY does not support wildcards");
  for (const name of names) {
    if (name !== "*" && !conn.caller.scope.allows(name)) {
      throw new FaktoryError(`the queue ${name} is outside the token's queues (${conn.caller.scope.text})`);
    }
  }
  const known = new Map(queuesInScope(door, conn).map((stats) => [stats.queue, stats]));
  if (sub === "LATENCY") {
    const nowMs = door.nowMs();
    const secondsOf = (name: string) => {
      const oldest = known.get(name)?.oldestReadyAtMs;
      return oldest === undefined ? 0 : Math.max(0, nowMs - oldest) / 1000;
    };
    // fromEntries: every name an own key, whatever it is (`__proto__` too).
    return bulk(JSON.stringify(Object.fromEntries(names.map((name) => [name, secondsOf(name)]))));
  }
  const targets = names.includes("*") ? [...known.values()] : [...new Set(names)].flatMap((name) => known.get(name) ?? []);
  for (const stats of targets) {
    if (sub === "PAUSE") await door.engine.pauseQueue(stats.queue);
    else if (sub === "RESUME") await door.engine.resumeQueue(stats.queue);
    // REMOVE: the queue's waiting jobs (ready, scheduled, retrying) go; running ones finish.
    else await removeQueue(door, stats, []);
  }
  return OK;
}

/** MUTATE's targets: Faktory's sets and the engine state holding their jobs. */
const TARGETS: Record<string, JobState> = { scheduled: "DELAYED", retries: "RETRYING", dead: "DEAD_LETTER" };
const MUTATE_COMMANDS = ["clear", "kill", "discard", "requeue"];

interface MutateFilter {
  jids: Set<string>;
  glob: RegExp | undefined;
  jobtype: string;
}

/**
 * MUTATE {"cmd","target","filter"}: clear, kill (to the dead letters), discard (delete) or
 * requeue (ready now) the jobs of a set (scheduled, retries, dead) the filter matches.
 */
async function mutate(door: FaktoryDoor, conn: FaktoryConnection, argText: string): Promise<Buffer> {
  let json: unknown;
  try {
    json = JSON.parse(argText);
  } catch (error) {
    throw new FaktoryError((error as Error).message);
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw new FaktoryError("invalid MUTATE: expected a JSON object");
  const { cmd, target, filter } = json as Record<string, unknown>;
  if (cmd !== undefined && typeof cmd !== "string") throw new FaktoryError("invalid MUTATE: cmd must be a string");
  if (target !== undefined && typeof target !== "string") throw new FaktoryError("invalid MUTATE: target must be a string");
  const state = typeof target === "string" && Object.hasOwn(TARGETS, target) ? TARGETS[target]! : undefined;
  if (state === undefined) throw new FaktoryError("invalid target for mutation command");
  if (typeof cmd !== "string" || !MUTATE_COMMANDS.includes(cmd)) throw new FaktoryError("unknown mutate operation");
  const matching = filterOf(filter);
  // Jobs already dead stay as they are.
  if (cmd === "kill" && state === "DEAD_LETTER") return OK;
  // clear empties the set whatever the filter says.
  const jids = await matchingJobs(door, conn, state, cmd === "clear" ? undefined : matching);
  if (cmd === "clear" || cmd === "discard") {
    await deleteJobs(door, jids);
  } else if (cmd === "kill") {
    for (const chunk of chunks(jids)) await door.engine.killJobs(chunk);
  } else if (state === "DEAD_LETTER") {
    for (const chunk of chunks(jids)) await door.engine.retryJobs(chunk);
  } else {
    for (const chunk of chunks(jids)) await door.engine.runNow(chunk);
  }
  return OK;
}

function chunks(jids: readonly string[]): string[][] {
  const out: string[][] = [];
  for (let start = 0; start < jids.length; start += PAGE) out.push(jids.slice(start, start + PAGE));
  return out;
}

/** MUTATE's `filter`: absent, null or `{}` matches every job. */
function filterOf(filter: unknown): MutateFilter {
  const none: MutateFilter = { jids: new Set(), glob: undefined, jobtype: "" };
  if (filter === undefined || filter === null) return none;
  if (typeof filter !== "object" || Array.isArray(filter)) throw new FaktoryError("invalid MUTATE: filter must be an object");
  const { jids, regexp, jobtype } = filter as Record<string, unknown>;
  if (jids !== undefined && jids !== null && (!Array.isArray(jids) || jids.some((jid) => typeof jid !== "string"))) {
    throw new FaktoryError("invalid MUTATE: filter.jids must be an array of strings");
  }
  if (regexp !== undefined && regexp !== null && typeof regexp !== "string")
    throw new FaktoryError("invalid MUTATE: filter.regexp must be a string");
  if (jobtype !== undefined && jobtype !== null && typeof jobtype !== "string") {
    throw new FaktoryError("invalid MUTATE: filter.jobtype must be a string");
  }
  if (typeof regexp === "string" && regexp.length > MAX_GLOB_CHARS) {
    throw new FaktoryError(`invalid MUTATE: filter.regexp must be at most ${MAX_GLOB_CHARS} characters`);
  }
  return {
    jids: new Set((jids as string[] | null | undefined) ?? []),
    glob: typeof regexp === "string" && regexp !== "" ? globRegExp(regexp) : undefined,
    jobtype: (jobtype as string | null | undefined) ?? "",
  };
}

/** Whether the job matches, as Faktory matches: by jid when jids are given, else by the glob over its JSON text, and by jobtype. */
function matches(view: JobView, filter: MutateFilter): boolean {
  if (filter.jids.size > 0) return filter.jids.has(faktoryJidOf(view.meta));
  if (filter.glob === undefined && filter.jobtype === "") return true;
  const job = faktoryJobOf(view);
  if (filter.jobtype !== "" && job.jobtype !== filter.jobtype) return false;
  return filter.glob === undefined || filter.glob.test(JSON.stringify(job));
}

/** The engine jids of the target's jobs (in the token's queues) that `filter` matches (all when undefined), read before any changes. */
async function matchingJobs(
  door: FaktoryDoor,
  conn: FaktoryConnection,
  state: JobState,
  filter: MutateFilter | undefined,
): Promise<string[]> {
  const scope = conn.caller.scope;
  const queues = scope.all ? [undefined] : queuesInScope(door, conn).map((stats) => stats.queue);
  const jids: string[] = [];
  for (const queue of queues) {
    for (let pageToken = ""; ;) {
      const page = await door.engine.listJobs({ ...(queue !== undefined && { queue }), state, pageSize: PAGE, pageToken });
      for (const view of page.jobs) if (!filter || matches(view, filter)) jids.push(view.meta.jid);
      if (page.nextPageToken === "") break;
      pageToken = page.nextPageToken;
    }
  }
  return jids;
}

/**
 * A Redis glob (what Faktory's `regexp` filter is: `*`, `?`, `[…]` with `^` and ranges, `\`
 * escaping the next character) as an anchored RegExp over the whole text.
 */
export function globRegExp(glob: string): RegExp {
  const literal = (char: string) => char.replace(/[\\^$.*+?()[\]{}|/-]/g, "\\$&");
  let source = "";
  for (let i = 0; i < glob.length; i++) {
    const char = glob[i]!;
    if (char === "*") source += "[\\s\\S]*";
    else if (char === "?") source += "[\\s\\S]";
    else if (char === "\\" && i + 1 < glob.length) source += literal(glob[++i]!);
    else if (char === "[") {
      let j = i + 1;
      const negate = glob[j] === "^";
      if (negate) j++;
      let items = "";
      while (j < glob.length && glob[j] !== "]") {
        if (glob[j] === "\\" && j + 1 < glob.length) {
          items += literal(glob[j + 1]!);
          j += 2;
        } else if (glob[j + 1] === "-" && j + 2 < glob.length && glob[j + 2] !== "]") {
          // A range; Redis takes a reversed one (z-a) as the same range.
          const [low, high] = [glob[j]!, glob[j + 2]!].sort();
          items += `${literal(low!)}-${literal(high!)}`;
          j += 3;
        } else {
          items += literal(glob[j]!);
          j++;
        }
      }
      // `[]` matches nothing, `[^]` any character, as in Redis.
      source += negate ? `[^${items}]` : items === "" ? "(?!)" : `[${items}]`;
      i = j; // at the `]` (or past the end: an unclosed class runs to the end, as in Redis)
    } else source += literal(char);
  }
  return new RegExp(`^${source}$`);
}
