import { BoundedMap } from "../model/bounded-map.js";
import { errorReply, NULL_BULK, OK, bulk } from "../faktory/door.js";
import { listenFaktoryPort, type FaktoryCommands, type FaktoryPortOptions, type GreetedConnection } from "../faktory/listener.js";
import { mayRun, messageOf, parseJson, reportOf } from "../faktory/commands.js";
import { FAKTORY_QUEUE_NAME, FaktoryError } from "../faktory/payload.js";
import { LIMITS } from "../model/limits.js";
import type { LineListener } from "../transport/line-listener.js";
import { jobPartition, partitionsOfQueue } from "./call-routes.js";
import { FaktoryUpstream, type UpstreamReply } from "./faktory-upstream.js";
import { mergeInfo, mergeLatency, splitJsonArray, strongestState } from "./faktory-merge.js";
import {
  PartitionConnections,
  ReadyWaits,
  type LinePortRouter,
  type LinePortRoutes,
  type LineRouterOptions,
} from "./partition-connections.js";

/** Where a node's Faktory port sends each partition's commands. */
export interface FaktoryRouterOptions extends FaktoryPortOptions, LineRouterOptions {}

/** How long FETCH waits for a job before answering none, as a server's own FETCH does. */
const FETCH_WAIT_MS = 2000;
/** After a wake that found no job (another worker took it, or a queue's limits hold it), the next round waits this long. */
const FRUITLESS_WAKE_MS = 20;
/** The most jobs one PUSHB takes (as a server's own port). */
const MAX_PUSHB_JOBS = 10_000;

/**
 * The Faktory port of a node whose jobs live in several partitions (`--engines N`, or a
 * partitioned cluster): each partition's server serves Faktory's protocol on a port of its
 * own, and this port speaks to the clients as one Faktory server. It checks the client's
 * HELLO itself, then opens a connection to a partition's port when a command first needs it,
 * saying the same HELLO there; each command goes to the partition it names (PUSH by the job's
 * queue, ACK and FAIL to where FETCH found the job), is split among them (PUSHB) or asked of
 * all and the answers joined (BEAT, INFO, FLUSH, QUEUE, MUTATE). A FETCH over queues of
 * several partitions takes the first ready job in the order listed without ever taking a job
 * the worker does not get: it asks each partition for a job at once (TAKE) in that order,
 * and when none has one, waits (WAIT) until one says a job is ready, then asks again.
 */
export async function startFaktoryRouter(options: FaktoryRouterOptions): Promise<LinePortRouter> {
  const shared: RouterState = {
    options,
    reservations: new BoundedMap(LIMITS.handedOutRemembered),
    commandCount: 0,
    connections: () => listener.connections(),
  };
  const listener: LineListener = await listenFaktoryPort(options, (greeted) => new RoutedConnection(shared, greeted));
  return { port: listener.port, close: () => listener.close() };
}

interface RouterState {
  options: FaktoryRouterOptions;
  /** Which partition handed out each job still reserved (by its Faktory jid), for the report that follows. */
  reservations: Map<string, number>;
  commandCount: number;
  connections(): number;
}

/** One client connection: its connections to the partitions' ports, opened as commands need them. */
class RoutedConnection implements FaktoryCommands {
  private readonly upstreams: PartitionConnections<FaktoryUpstream>;
  /** Connections that only WAIT, so a wait left running never holds up the next TAKE. */
  private readonly watchers: PartitionConnections<FaktoryUpstream>;
  private readonly waits: ReadyWaits;
  private takeTurn = 0;

  constructor(
    private readonly state: RouterState,
    private readonly greeted: GreetedConnection,
  ) {
    const { routes, linkTls, log } = state.options;
    const connect = (address: string) => FaktoryUpstream.open(address, linkTls, greeted.hello, greeted.password);
    const refuse = (message: string) => new FaktoryError(message);
    this.upstreams = new PartitionConnections(routes, connect, refuse, log);
    this.watchers = new PartitionConnections(routes, connect, refuse, log);
    this.waits = new ReadyWaits(
      async (partition, queues, ms) => {
        const reply = await (await this.watchers.get(partition)).command(`WAIT ${ms} ${queues.join(" ")}`);
        if (reply.kind === "error") throw new Error(reply.text);
        return reply.kind === "ok";
      },
      FETCH_WAIT_MS,
      (partition) => this.watchers.close(partition),
    );
  }

  private get routes(): LinePortRoutes {
    return this.state.options.routes;
  }

  async run(verb: string, argText: string): Promise<Buffer> {
    this.state.commandCount++;
    try {
      switch (verb) {
        case "PUSH":
          return await this.push(argText);
        case "PUSHB":
          return await this.pushBatch(argText);
        case "FETCH":
          return await this.fetch("FETCH", argText, FETCH_WAIT_MS);
        case "TAKE":
          return await this.fetch("TAKE", argText, 0);
        case "WAIT":
          return await this.waitReady(argText);
        case "ACK":
        case "FAIL":
          return await this.report(verb, argText);
        case "BEAT":
          return await this.beat(argText);
        case "INFO":
          return await this.info();
        case "QUEUE":
          return await this.queue(argText);
        case "FLUSH":
        case "MUTATE":
          return await this.everywhere(line(verb, argText));
        default:
          // Unknown commands and those no partition needs to share (BATCH, TRACK): any server answers alike.
          return (await this.send(this.routes.anyPartition(), line(verb, argText))).raw;
      }
    } catch (error) {
      return errorReply(messageOf(error));
    }
  }

  closed(): void {
    this.upstreams.closeAll();
    this.watchers.closeAll();
  }

  /** PUSH: to the partition of the job's queue (a spread queue's by the job's jid, which is its idempotency key). */
  private async push(argText: string): Promise<Buffer> {
    return (await this.send(this.partitionOfJob(parseJson(argText)), `PUSH ${argText}`)).raw;
  }

  private partitionOfJob(job: unknown): number {
    if (typeof job !== "object" || job === null || Array.isArray(job)) return this.routes.anyPartition();
    const { queue, jid } = job as { queue?: unknown; jid?: unknown };
    return jobPartition(
      { queue: typeof queue === "string" && queue !== "" ? queue : "default", idempotencyKey: typeof jid === "string" ? jid : "" },
      this.routes.placement,
    );
  }

  /** PUSHB: each partition's jobs as a PUSHB of their own; the refusals joined (a partition that refused all: each of its jobs). */
  private async pushBatch(argText: string): Promise<Buffer> {
    const jobs = parseJson(argText);
    if (!Array.isArray(jobs) || jobs.length > MAX_PUSHB_JOBS) return (await this.send(this.routes.anyPartition(), `PUSHB ${argText}`)).raw;
    const texts = splitJsonArray(argText);
    const groups = new Map<number, number[]>();
    jobs.forEach((job, i) => {
      const partition = this.partitionOfJob(job);
      groups.set(partition, [...(groups.get(partition) ?? []), i]);
    });
    if (groups.size <= 1) return (await this.send([...groups.keys()][0] ?? this.routes.anyPartition(), `PUSHB ${argText}`)).raw;
    const refused: Record<string, string> = {};
    const jidOf = (i: number) => {
      const jid = (jobs[i] as { jid?: unknown } | null)?.jid;
      return typeof jid === "string" ? jid : "";
    };
    await Promise.all(
      [...groups].map(async ([partition, indexes]) => {
        let reply: UpstreamReply;
        try {
          reply = await this.send(partition, `PUSHB [${indexes.map((i) => texts[i]).join(",")}]`);
        } catch (error) {
          reply = { raw: Buffer.alloc(0), kind: "error", text: `ERR ${(error as Error).message}` };
        }
        if (reply.kind === "bulk") Object.assign(refused, JSON.parse(reply.text) as Record<string, string>);
        else for (const i of indexes) refused[jidOf(i)] = reply.text.replace(/^ERR /, "");
      }),
    );
    return bulk(JSON.stringify(refused));
  }

  /**
   * FETCH q1 q2 … (and TAKE, which does not wait): the queues in runs of one partition each,
   * in the order listed (a spread queue in each of its partitions, the first in turn); each
   * run asked for a job at once, in order; when none has one, every partition asked to say
   * when one is ready, until `waitMs` has passed.
   */
  private async fetch(verb: "FETCH" | "TAKE", argText: string, waitMs: number): Promise<Buffer> {
    const names = queueNames(argText.split(" "));
    const runs = this.runsOf(names);
    if (this.refusedByAServer(verb, names) || new Set(runs.map((run) => run.partition)).size === 1) {
      return this.fetched(runs[0]!.partition, await this.send(runs[0]!.partition, `${verb} ${names.join(" ")}`));
    }
    const deadline = Date.now() + waitMs;
    for (let round = 0; ; round++) {
      for (const run of runs) {
        const reply = await this.send(run.partition, `TAKE ${run.queues.join(" ")}`);
        if (reply.kind !== "null") return this.fetched(run.partition, reply);
      }
      const left = deadline - Date.now();
      if (left <= 0 || this.greeted.signal.aborted) return NULL_BULK;
      if (round > 0) await delay(Math.min(FRUITLESS_WAKE_MS, left));
      if (!(await this.anyReady(runs, deadline))) return NULL_BULK;
    }
  }

  /** WAIT <ms> q1 q2 …: +OK once any of the queues' partitions has a ready job, none after `ms`. */
  private async waitReady(argText: string): Promise<Buffer> {
    const [msText = "", ...rest] = argText.split(" ");
    const names = queueNames(rest);
    const runs = this.runsOf(names);
    const ms = /^[0-9]{1,5}$/.test(msText) ? Number(msText) : Number.NaN;
    if (this.refusedByAServer("WAIT", names) || !(ms <= FETCH_WAIT_MS) || new Set(runs.map((run) => run.partition)).size === 1) {
      return (await this.send(runs[0]!.partition, `WAIT ${argText}`)).raw;
    }
    return (await this.anyReady(runs, Date.now() + ms)) ? OK : NULL_BULK;
  }

  /**
   * Whether a server would refuse a FETCH, TAKE or WAIT over `names` (the token's role, a
   * name's form, a queue outside the token's queues, more queues than one lease takes): then
   * the whole command is refused, as one server's is, by one server, which says why.
   */
  private refusedByAServer(verb: string, names: readonly string[]): boolean {
    const { caller } = this.greeted;
    return (
      !mayRun(caller, verb) ||
      names.length > LIMITS.leaseMaxQueues ||
      names.some((name) => !FAKTORY_QUEUE_NAME.test(name) || !caller.scope.allows(name))
    );
  }

  private fetched(partition: number, reply: UpstreamReply): Buffer {
    if (reply.kind === "bulk") {
      const jid = (JSON.parse(reply.text) as { jid?: unknown }).jid;
      if (typeof jid === "string") {
        this.state.reservations.set(jid, partition);
      }
    }
    return reply.raw;
  }

  /** The listed queues as runs of consecutive queues that live in one partition. */
  private runsOf(names: readonly string[]): { partition: number; queues: string[] }[] {
    const runs: { partition: number; queues: string[] }[] = [];
    const turn = this.takeTurn++;
    for (const name of names) {
      const partitions = partitionsOfQueue(name, this.routes.placement);
      for (let i = 0; i < partitions.length; i++) {
        const partition = partitions[(turn + i) % partitions.length]!;
        const last = runs[runs.length - 1];
        if (last?.partition === partition) last.queues.push(name);
        else runs.push({ partition, queues: [name] });
      }
    }
    return runs;
  }

  /** Resolves true once any of the runs' partitions says a job is ready, false at the deadline. */
  private anyReady(runs: readonly { partition: number; queues: string[] }[], deadline: number): Promise<boolean> {
    const byPartition = new Map<number, string[]>();
    for (const run of runs) byPartition.set(run.partition, [...new Set([...(byPartition.get(run.partition) ?? []), ...run.queues])]);
    return this.waits.anyReady(byPartition, deadline);
  }

  /** ACK and FAIL: to the partition that handed out the job, else to each until one knows it. */
  private async report(verb: "ACK" | "FAIL", argText: string): Promise<Buffer> {
    // What is not a report is refused here as a server refuses it, without a trip to one.
    const { jid } = reportOf(argText, verb);
    if (typeof jid !== "string" || jid === "") return (await this.send(this.routes.anyPartition(), `${verb} ${argText}`)).raw;
    const known = this.state.reservations.get(jid);
    if (known !== undefined) {
      const reply = await this.send(known, `${verb} ${argText}`);
      if (reply.kind === "ok") this.state.reservations.delete(jid);
      return reply.raw;
    }
    // Handed out before this node started, or by another node: an ACK of a job a server does
    // not hold changes nothing there, and a FAIL of one it does not know is refused.
    let first: UpstreamReply | undefined;
    for (let partition = 0; partition < this.routes.placement.count; partition++) {
      const reply = await this.send(partition, `${verb} ${argText}`);
      if (reply.kind === "ok" && verb === "FAIL") return reply.raw;
      if (reply.kind === "error") first ??= reply;
    }
    return verb === "ACK" && first === undefined ? OK : (first?.raw ?? OK);
  }

  /** BEAT: to every partition (each hears the worker); answered with the strongest state any says. */
  private async beat(argText: string): Promise<Buffer> {
    reportOf(argText, "BEAT");
    const replies = await this.all(`BEAT ${argText}`);
    const refused = replies.find((reply) => reply.kind === "error");
    if (refused) return refused.raw;
    const states = replies.map((reply) =>
      reply.kind === "bulk" ? ((JSON.parse(reply.text) as { state: "quiet" | "terminate" }).state ?? "running") : "running",
    );
    const state = strongestState(states);
    return state === "running" ? OK : bulk(JSON.stringify({ state }));
  }

  private async info(): Promise<Buffer> {
    const replies = await this.all("INFO");
    const refused = replies.find((reply) => reply.kind !== "bulk");
    if (refused) return refused.raw;
    return bulk(
      JSON.stringify(
        mergeInfo(
          replies.map((reply) => JSON.parse(reply.text) as Parameters<typeof mergeInfo>[0][number]),
          { connections: this.state.connections(), commandCount: this.state.commandCount },
        ),
      ),
    );
  }

  /** QUEUE: every partition acts on the named queues it holds; LATENCY's answers joined. */
  private async queue(argText: string): Promise<Buffer> {
    const replies = await this.all(`QUEUE ${argText}`);
    const refused = replies.find((reply) => reply.kind === "error");
    if (refused) return refused.raw;
    if (replies.every((reply) => reply.kind === "ok")) return OK;
    return bulk(JSON.stringify(mergeLatency(replies.map((reply) => JSON.parse(reply.text) as Record<string, number>))));
  }

  /** A command every partition must take (FLUSH, MUTATE): OK once all did, else the first refusal. */
  private async everywhere(text: string): Promise<Buffer> {
    const replies = await this.all(text);
    return (replies.find((reply) => reply.kind !== "ok") ?? { raw: OK }).raw;
  }

  private all(text: string): Promise<UpstreamReply[]> {
    return Promise.all(Array.from({ length: this.routes.placement.count }, (_, partition) => this.send(partition, text)));
  }

  /** Sends one line to `partition`'s port on this client's connection there; rejects (with what to tell the client) when it cannot. */
  private async send(partition: number, text: string): Promise<UpstreamReply> {
    const upstream = await this.upstreams.get(partition);
    try {
      return await upstream.command(text);
    } catch (error) {
      throw new FaktoryError(`partition ${partition}'s server went away during the command (${(error as Error).message}); send it again`);
    }
  }
}

function line(verb: string, argText: string): string {
  return argText === "" ? verb : `${verb} ${argText}`;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The queues a FETCH, TAKE or WAIT names (`default` when none), as a server reads them. */
function queueNames(words: readonly string[]): string[] {
  const names = words.filter((name) => name !== "");
  return names.length === 0 ? ["default"] : names;
}
