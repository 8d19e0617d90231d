import { BoundedMap } from "../model/bounded-map.js";
import type { WorkqConnection } from "../workq/commands.js";
import type { WorkqCommand } from "../workq/framing.js";
import { listenWorkqPort, type WorkqPortOptions } from "../workq/listener.js";
import { LIMITS } from "../model/limits.js";
import type { LineListener } from "../transport/line-listener.js";
import { jobPartition, partitionsOfQueue } from "./call-routes.js";
import {
  PartitionConnections,
  ReadyWaits,
  type LinePortRouter,
  type LinePortRoutes,
  type LineRouterOptions,
} from "./partition-connections.js";
import { WorkqUpstream } from "./workq-upstream.js";

export interface WorkqRouterOptions extends WorkqPortOptions, LineRouterOptions {}

/** Workq's longest wait-timeout (a day), as a server's own port takes. */
const MAX_WAIT_MS = 86_400_000;
/** The longest one `wait` asked of a partition's port (a longer lease asks again). */
const MAX_READY_WAIT_MS = 60_000;
/** After a wake that found no job (another client took it, or a queue's limits hold it), the next round waits this long. */
const FRUITLESS_WAKE_MS = 20;
/** Queues read per `inspect queues` asked of a partition while the listing is joined. */
const QUEUES_PAGE = 100;

const NOT_FOUND = "-NOT-FOUND\r\n";
const TIMEOUT = Buffer.from("-TIMEOUT\r\n");

/**
 * The Workq port of a node whose jobs live in several partitions (`--engines N`, or a
 * partitioned cluster): each partition's server serves Workq's protocol on a port of its own,
 * and this port speaks to the clients as one Workq server, passing each command (its line
 * and data block as sent) to the partition it concerns. add, schedule and run go to the
 * partition of the job's queue; result, complete, fail, delete and `inspect job` to the one
 * that holds the job (remembered from its add or lease, else asked of each until one knows
 * it); inspect's listings are joined. A lease over queues of several partitions never takes
 * a job the client does not get: it polls each partition (`lease … 0`) in a random order,
 * and when none has a job, waits (`wait`, Worq's own) until one says a job is ready, then
 * polls again.
 */
export async function startWorkqRouter(options: WorkqRouterOptions): Promise<LinePortRouter> {
  const state: RouterState = {
    options,
    known: new BoundedMap(LIMITS.handedOutRemembered),
    startedAt: new Date(),
    connections: () => listener.connections(),
  };
  const listener: LineListener = await listenWorkqPort(options, (conn) => {
    const routed = new RoutedConnection(state, conn);
    conn.signal.addEventListener("abort", () => routed.closed());
    return (command) => routed.run(command);
  });
  return { port: listener.port, close: () => listener.close() };
}

interface RouterState {
  options: WorkqRouterOptions;
  /** Workq id (lower case) -> the partition holding its job. */
  /** Which partition holds each job added or leased through this port (by its Workq id), for the commands that name it. */
  known: Map<string, number>;
  startedAt: Date;
  connections(): number;
}

class ClientError extends Error {}

class RoutedConnection {
  private readonly upstreams: PartitionConnections<WorkqUpstream>;
  private readonly watchers: PartitionConnections<WorkqUpstream>;
  private readonly waits: ReadyWaits;

  constructor(
    private readonly state: RouterState,
    private readonly conn: WorkqConnection,
  ) {
    const { routes, linkTls, log } = state.options;
    const connect = (address: string) => WorkqUpstream.open(address, linkTls);
    const refuse = (message: string) => new ClientError(message);
    this.upstreams = new PartitionConnections(routes, connect, refuse, log);
    this.watchers = new PartitionConnections(routes, connect, refuse, log);
    this.waits = new ReadyWaits(
      async (partition, queues, ms) => {
        const watcher = await this.watchers.get(partition);
        const reply = (await watcher.send(lineCommand(`wait ${queues.join(" ")} ${ms}`).encoded)).toString("latin1");
        if (reply.startsWith("-CLIENT-ERROR") || reply.startsWith("-SERVER-ERROR")) throw new Error(reply.trim());
        return reply === "+OK\r\n";
      },
      MAX_READY_WAIT_MS,
      (partition) => this.watchers.close(partition),
    );
  }

  private get routes(): LinePortRoutes {
    return this.state.options.routes;
  }

  async run(command: WorkqCommand): Promise<Buffer> {
    try {
      switch (command.name) {
        case "add":
        case "schedule":
        case "run":
          return await this.addJob(command);
        case "lease":
          return await this.lease(command);
        case "wait":
          return await this.waitReady(command);
        case "result":
        case "complete":
        case "fail":
        case "delete":
          return await this.toHolder(command.args[0], command);
        case "inspect":
          return await this.inspect(command);
        default:
          return await this.send(this.routes.anyPartition(), command);
      }
    } catch (error) {
      const message = (error as Error).message.replace(/[\r\n]+/g, " ");
      return Buffer.from(error instanceof ClientError ? `-CLIENT-ERROR ${message}\r\n` : `-SERVER-ERROR ${message}\r\n`);
    }
  }

  closed(): void {
    this.upstreams.closeAll();
    this.watchers.closeAll();
  }

  /** add, schedule, run: to the partition of the job's queue (a spread queue's by the job's id, its idempotency key). */
  private async addJob(command: WorkqCommand): Promise<Buffer> {
    const [id = "", queue = ""] = command.args;
    const partition = jobPartition({ queue, idempotencyKey: id.toLowerCase() }, this.routes.placement);
    const reply = await this.send(partition, command);
    if (command.name !== "run" && reply.toString("latin1") === "+OK\r\n") this.remember(id, partition);
    return reply;
  }

  /**
   * lease <queue>... <wait>: over one partition, that partition's lease; over several, each
   * polled in a random order, then all waited on until one has a job, until the wait ends.
   */
  private async lease(command: WorkqCommand): Promise<Buffer> {
    const names = command.args.slice(0, -1);
    const groups = this.byPartition(names);
    // What a server would refuse refuses the whole lease, as one server's does: it says so.
    const waitMs = this.waitOf(command);
    if (groups.size <= 1 || this.refusedByAServer(command, names)) {
      const partition = groups.keys().next().value ?? this.routes.anyPartition();
      return this.remembered(await this.send(partition, command), partition);
    }
    const deadline = Date.now() + waitMs;
    for (let round = 0; ; round++) {
      for (const [partition, queues] of shuffled([...groups])) {
        const reply = await this.send(partition, lineCommand(`lease ${queues.join(" ")} 0`));
        if (!reply.equals(TIMEOUT)) return this.remembered(reply, partition);
      }
      const left = deadline - Date.now();
      if (left <= 0 || this.conn.signal.aborted) return TIMEOUT;
      if (round > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(FRUITLESS_WAKE_MS, left)));
      if (!(await this.waits.anyReady(groups, deadline))) return TIMEOUT;
    }
  }

  /** wait <queue>... <wait-timeout>: +OK once any of the queues' partitions has a ready job. */
  private async waitReady(command: WorkqCommand): Promise<Buffer> {
    const names = command.args.slice(0, -1);
    const groups = this.byPartition(names);
    if (this.refusedByAServer(command, names) || !(this.waitOf(command) <= MAX_READY_WAIT_MS) || groups.size <= 1) {
      return this.send(groups.keys().next().value ?? this.routes.anyPartition(), command);
    }
    return (await this.waits.anyReady(groups, Date.now() + this.waitOf(command))) ? Buffer.from("+OK\r\n") : TIMEOUT;
  }

  /**
   * Whether a server would refuse a lease or wait over `names` (flags, the form of a name or
   * of the wait, a queue outside the token's queues, more queues than one lease takes): then
   * one server is asked, and says why.
   */
  private refusedByAServer(command: WorkqCommand, names: readonly string[]): boolean {
    return (
      command.flags.size > 0 ||
      command.badFlags ||
      !(this.waitOf(command) >= 0) ||
      names.length > LIMITS.leaseMaxQueues ||
      names.some((name) => !this.mayLease(name))
    );
  }

  private mayLease(name: string): boolean {
    return name.length <= LIMITS.queueMaxChars && LIMITS.queuePattern.test(name) && this.conn.caller.scope.allows(name);
  }

  /** A command's last argument as a wait-timeout in ms; NaN when a server would refuse it. */
  private waitOf(command: WorkqCommand): number {
    const text = command.args.at(-1) ?? "";
    const ms = /^\d{1,9}$/.test(text) ? Number(text) : Number.NaN;
    return ms <= MAX_WAIT_MS ? ms : Number.NaN;
  }

  /** The queues named, by the partitions they live in (a spread queue in each of its own). */
  private byPartition(names: readonly string[]): Map<number, string[]> {
    const groups = new Map<number, string[]>();
    for (const name of names) {
      for (const partition of partitionsOfQueue(name, this.routes.placement))
        groups.set(partition, [...(groups.get(partition) ?? []), name]);
    }
    return groups;
  }

  /** A lease's reply; the job it hands out is remembered as in `partition`. */
  private remembered(reply: Buffer, partition?: number): Buffer {
    if (partition !== undefined && reply.subarray(0, 7).toString("latin1") === "+OK 1\r\n") {
      const id = reply.toString("latin1", 7, reply.indexOf(" ", 7));
      this.remember(id, partition);
    }
    return reply;
  }

  private remember(id: string, partition: number): void {
    this.state.known.set(id.toLowerCase(), partition);
  }

  /** A command naming a job by its Workq id: to the partition holding it, else to each until one knows it. */
  private async toHolder(id: string | undefined, command: WorkqCommand): Promise<Buffer> {
    const known = id === undefined ? undefined : this.state.known.get(id.toLowerCase());
    if (known !== undefined) {
      const reply = await this.send(known, command);
      if (reply.toString("latin1") !== NOT_FOUND) return reply;
      // Gone from there (deleted, its id added again elsewhere): looked for as any other.
      this.state.known.delete(id!.toLowerCase());
    }
    let reply: Buffer | undefined;
    for (let partition = 0; partition < this.routes.placement.count; partition++) {
      if (partition === known) continue;
      reply = await this.send(partition, command);
      if (reply.toString("latin1") !== NOT_FOUND) {
        if (id !== undefined && reply.toString("latin1", 0, 3) === "+OK") this.remember(id, partition);
        return reply;
      }
    }
    return reply ?? Buffer.from(NOT_FOUND);
  }

  private async inspect(command: WorkqCommand): Promise<Buffer> {
    const [object, ...args] = command.args;
    if (command.flags.size > 0 || command.badFlags) return this.send(this.routes.anyPartition(), command);
    if (object === "job" && args.length === 1) return this.toHolder(args[0], command);
    if (object === "server" && args.length === 0) return this.inspectServer(command);
    if (object === "queue" && args.length === 1 && LIMITS.queuePattern.test(args[0]!)) return this.inspectQueue(args[0]!, command);
    if (object === "queues" && args.length === 2 && validCursor(args[0]!, args[1]!))
      return this.inspectQueues(Number(args[0]), Number(args[1]));
    if (
      (object === "jobs" || object === "scheduled-jobs") &&
      args.length === 3 &&
      LIMITS.queuePattern.test(args[0]!) &&
      validCursor(args[1]!, args[2]!)
    ) {
      return this.inspectJobs(object, args[0]!, Number(args[1]), Number(args[2]), command);
    }
    // Anything else is answered alike by any server (a refusal, as a rule).
    return this.send(this.routes.anyPartition(), command);
  }

  /** inspect server: the clients of this port, the partitions' evictions added up, the port's start. */
  private async inspectServer(command: WorkqCommand): Promise<Buffer> {
    const replies = await this.all(command);
    let evicted = 0;
    for (const reply of replies) {
      const text = reply.toString("latin1");
      if (!text.startsWith("+OK 1\r\n")) return reply;
      evicted += Number(/\r\nevicted-jobs (\d+)\r\n/.exec(text)?.[1] ?? 0);
    }
    const started = this.state.startedAt.toISOString().replace(/\.\d+Z$/, "Z");
    return Buffer.from(
      `+OK 1\r\nserver 3\r\nactive-clients ${this.state.connections()}\r\nevicted-jobs ${evicted}\r\nstarted ${started}\r\n`,
    );
  }

  /** inspect queue <name>: the figures of its partitions added up; NOT-FOUND when none has it. */
  private async inspectQueue(name: string, command: WorkqCommand): Promise<Buffer> {
    const partitions = partitionsOfQueue(name, this.routes.placement);
    if (partitions.length === 1) return this.send(partitions[0]!, command);
    const figures = await this.queueFigures(partitions, name);
    if (!Array.isArray(figures)) return figures;
    const total = figures.reduce((sum, next) => ({ ready: sum.ready + next.ready, scheduled: sum.scheduled + next.scheduled }));
    return Buffer.from(`+OK 1\r\n${queueBlock(name, total.ready, total.scheduled)}`);
  }

  /**
   * A queue's figures in each of `partitions` (zero where it is not), or what to answer instead:
   * NOT-FOUND when none has it, or the refusal one gave.
   */
  private async queueFigures(partitions: readonly number[], name: string): Promise<{ ready: number; scheduled: number }[] | Buffer> {
    const replies = await Promise.all(partitions.map((partition) => this.send(partition, lineCommand(`inspect queue ${name}`))));
    if (replies.every((reply) => reply.toString("latin1") === NOT_FOUND)) return Buffer.from(NOT_FOUND);
    const figures: { ready: number; scheduled: number }[] = [];
    for (const reply of replies) {
      if (reply.toString("latin1") === NOT_FOUND) {
        figures.push({ ready: 0, scheduled: 0 });
        continue;
      }
      const block = parseQueueBlocks(reply.toString("latin1"))?.[0];
      if (block === undefined) return reply;
      figures.push({ ready: block.ready, scheduled: block.scheduled });
    }
    return figures;
  }

  /** inspect queues <offset> <limit>: every partition's queues, joined by name (a spread queue's figures added up), in name order. */
  private async inspectQueues(offset: number, limit: number): Promise<Buffer> {
    const byName = new Map<string, { ready: number; scheduled: number }>();
    for (let partition = 0; partition < this.routes.placement.count; partition++) {
      for (let at = 0; ; at += QUEUES_PAGE) {
        const reply = await this.send(partition, lineCommand(`inspect queues ${at} ${QUEUES_PAGE}`));
        const blocks = parseQueueBlocks(reply.toString("latin1"));
        if (blocks === undefined) return reply;
        for (const block of blocks) {
          const seen = byName.get(block.name) ?? { ready: 0, scheduled: 0 };
          byName.set(block.name, { ready: seen.ready + block.ready, scheduled: seen.scheduled + block.scheduled });
        }
        // Each partition lists its queues in name order: the window needs its first offset + limit at most.
        if (blocks.length < QUEUES_PAGE || at + blocks.length >= offset + limit) break;
      }
    }
    const shown = [...byName].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).slice(offset, offset + limit);
    return Buffer.from(
      `+OK ${shown.length}\r\n${shown.map(([name, figures]) => queueBlock(name, figures.ready, figures.scheduled)).join("")}`,
    );
  }

  /**
   * inspect jobs|scheduled-jobs <name> <offset> <limit> of a spread queue: its partitions' jobs
   * one partition after another, each partition's share of the window asked of it (its count
   * read first), the records passed on as they came.
   */
  private async inspectJobs(object: string, name: string, offset: number, limit: number, command: WorkqCommand): Promise<Buffer> {
    const partitions = partitionsOfQueue(name, this.routes.placement);
    if (partitions.length === 1) return this.send(partitions[0]!, command);
    const figures = await this.queueFigures(partitions, name);
    if (!Array.isArray(figures)) return figures;
    const records: Buffer[] = [];
    let count = 0;
    let skip = offset;
    for (const [i, partition] of partitions.entries()) {
      const held = object === "jobs" ? figures[i]!.ready : figures[i]!.scheduled;
      if (skip >= held) {
        skip -= held;
        continue;
      }
      const want = limit - count;
      if (want <= 0) break;
      const reply = await this.send(partition, lineCommand(`inspect ${object} ${name} ${skip} ${want}`));
      skip = 0;
      const head = /^\+OK (\d+)\r\n/.exec(reply.toString("latin1", 0, 32));
      if (!head) {
        if (reply.toString("latin1") === NOT_FOUND) continue;
        return reply;
      }
      count += Number(head[1]);
      records.push(reply.subarray(head[0].length));
    }
    return Buffer.concat([Buffer.from(`+OK ${count}\r\n`), ...records]);
  }

  private all(command: WorkqCommand): Promise<Buffer[]> {
    return Promise.all(Array.from({ length: this.routes.placement.count }, (_, partition) => this.send(partition, command)));
  }

  /** Sends a command to `partition`'s port on this client's connection there; rejects (with what to tell the client) when it cannot. */
  private async send(partition: number, command: WorkqCommand | { encoded: Buffer }): Promise<Buffer> {
    const upstream = await this.upstreams.get(partition);
    try {
      return await upstream.send("encoded" in command ? command.encoded : encode(command));
    } catch (error) {
      throw new Error(`partition ${partition}'s server went away during the command (${(error as Error).message}); send it again`);
    }
  }
}

/** A command as it came: its line and, for those that have one, its data block. */
function encode(command: WorkqCommand): Buffer {
  const line = Buffer.from(`${command.line}\r\n`, "latin1");
  return command.block === undefined ? line : Buffer.concat([line, command.block, Buffer.from("\r\n")]);
}

/** A command line of the router's own. */
function lineCommand(line: string): { encoded: Buffer } {
  return { encoded: Buffer.from(`${line}\r\n`, "latin1") };
}

function validCursor(offset: string, limit: string): boolean {
  return (
    /^\d{1,10}$/.test(offset) && Number(offset) <= 4_294_967_295 && /^\d{1,3}$/.test(limit) && Number(limit) >= 1 && Number(limit) <= 100
  );
}

function queueBlock(name: string, ready: number, scheduled: number): string {
  return `${name} 2\r\nready-len ${ready}\r\nscheduled-len ${scheduled}\r\n`;
}

/** The queue blocks of an `inspect queue(s)` reply; undefined when it is not one (a refusal). */
function parseQueueBlocks(text: string): { name: string; ready: number; scheduled: number }[] | undefined {
  const lines = text.split("\r\n");
  const head = /^\+OK (\d+)$/.exec(lines[0] ?? "");
  if (!head) return undefined;
  const blocks: { name: string; ready: number; scheduled: number }[] = [];
  for (let i = 0; i < Number(head[1]); i++) {
    const [name, , ready, scheduled] = [lines[1 + 3 * i]?.split(" ")[0], 0, lines[2 + 3 * i], lines[3 + 3 * i]];
    blocks.push({ name: name ?? "", ready: Number(ready?.split(" ")[1] ?? 0), scheduled: Number(scheduled?.split(" ")[1] ?? 0) });
  }
  return blocks;
}

function shuffled<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}
