import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { ServerConfig } from "./config.js";
import type { Logger } from "./log.js";
import { readMetrics, type MetricsRead } from "./cluster/metrics-merge.js";
import { askOverIpc } from "./ipc-ask.js";
import type { JobMeta } from "./model/job.js";
import { decodeInboxRecord } from "./storage/inbox-codec.js";
import { SubmitRateLimiter, type SubmitRate } from "./transport/auth/submit-rate.js";

/** The engine process's entry (compiled beside this module). */
const ENGINE_CHILD = fileURLToPath(new URL("./engine-child.js", import.meta.url));
/** How long an engine process may take to open its store and listen. */
const ENGINE_START_MS = 60_000;
/** Waits before an engine process that died is started again: the first, then doubling up to the last. */
const RESTART_MS = [250, 10_000] as const;
/** How long an engine process must have served for its next death to wait the first delay again. */
const SERVED_WELL_MS = 10_000;
/** How long a request for an engine's metrics waits for its answer. */
const METRICS_MS = 2_000;

/** An engine's question for the metas of jobs in another engine's partition (src/engine-child.ts). */
interface MetasQuestion {
  askMetas?: number;
  partition: number;
  jids: string[];
}

/** An engine's draw from a caller's --submit-rate bucket, which the parent keeps for all engines. */
interface SubmitsQuestion {
  drawSubmits?: number;
  caller: string;
  need: number;
  most: number;
}

/** An engine's word on its waits for other engines' jobs, or a hint that it committed ends (src/engine-child.ts). */
interface EndsMessage {
  remoteWaiting?: boolean;
  endsIn?: number;
}

/** An engine's records of jobs for other engines (a batch over several), or word that one was applied (src/engine-child.ts). */
interface InboxMessage {
  inboxRecords?: string[];
  inboxApplied?: string;
  from?: number;
}

/** One engine process as its parent keeps it. */
export interface EngineProcess {
  index: number;
  child: ChildProcess | undefined;
  /** Where it takes gRPC calls, once listening (undefined while it starts or after it died). */
  grpcAddress: string | undefined;
  /** Where its HTTP port takes the job JSON routes (/v1/jobs), while it listens. */
  httpAddress: string | undefined;
  /** Where its Faktory port is, while it listens (with --faktory-port). */
  faktoryAddress: string | undefined;
  /** Where its Workq port is, while it listens (with --workq-port). */
  workqAddress: string | undefined;
  /** How many times it was started again (its partitions' epoch follows it). */
  restarts: number;
  /** Deaths since it last served SERVED_WELL_MS: the restart backoff's exponent. */
  deathsInARow: number;
  /** When its current process began to listen. */
  servingSince: number;
  /** Whether its jobs wait for jobs of other engines now (it says so when that changes). */
  remoteWaiting: boolean;
}

/**
 * The engine processes of `worq serve --engines` (src/engine-child.ts, each given the config
 * `configOf` makes for it): started together, each started again when it dies (backoff
 * 250 ms doubling to 10 s, from 250 ms again once it served 10 s), stopped together
 * (SIGTERM); an engine whose parent is gone stops by itself (its IPC channel closes).
 */
export class EngineProcesses {
  readonly engines: EngineProcess[];
  private stopping = false;
  private asked = 0;
  private readonly submitBuckets: SubmitRateLimiter | undefined;
  /**
   * The jids of records of jobs one engine's commit made for another (a batch over several
   * engines), by record id: kept from when the sender hands them here until their engine says
   * it stored them, so that a read of their jobs meanwhile finds them (inFlightJobs).
   */
  private readonly inFlight = new Map<string, string[]>();
  /** The jobs of the records in flight, by jid. */
  private readonly inFlightJobs = new Map<string, JobMeta>();

  constructor(
    count: number,
    private readonly configOf: (index: number) => ServerConfig,
    /** The host the engines' ports are reached at. */
    private readonly advertised: string,
    private readonly log: Logger,
    /** Counted here, for all the engines, when they ask (LevelDB engines serve the same callers). */
    submitRate?: SubmitRate,
  ) {
    this.submitBuckets = submitRate && new SubmitRateLimiter(submitRate);
    this.engines = Array.from({ length: count }, (_, index) => ({
      index,
      child: undefined,
      grpcAddress: undefined,
      httpAddress: undefined,
      faktoryAddress: undefined,
      workqAddress: undefined,
      restarts: 0,
      deathsInARow: 0,
      servingSince: 0,
      remoteWaiting: false,
    }));
  }

  /** Starts every engine; rejects (having stopped those that started) if one does not listen. */
  async startAll(): Promise<void> {
    try {
      await Promise.all(this.engines.map((engine) => this.start(engine)));
    } catch (error) {
      await this.stopAll();
      throw error;
    }
  }

  async stopAll(): Promise<void> {
    this.stopping = true;
    await Promise.all(
      this.engines.map(
        (engine) =>
          new Promise<void>((done) => {
            const child = engine.child;
            if (!child || child.exitCode !== null || child.signalCode !== null) return done();
            child.once("exit", () => done());
            child.kill("SIGTERM");
          }),
      ),
    );
  }

  /** Sends `signal` to every running engine (SIGHUP: re-read the token file). */
  signalAll(signal: NodeJS.Signals): void {
    for (const engine of this.engines) engine.child?.kill(signal);
  }

  /**
   * What the /metrics of each partition the engines serve shows now, asked over their IPC
   * channels (no port, token or TLS between them).
   */
  metrics(): Promise<MetricsRead> {
    return readMetrics(
      this.engines.flatMap((engine) => {
        const child = engine.child;
        if (!child || engine.grpcAddress === undefined) return [];
        const read = async () => {
          const id = ++this.asked;
          const answer = await askOverIpc(
            child,
            { metrics: id },
            (message: { metricsOf?: number } & Partial<MetricsRead> & { error?: string }) =>
              message.metricsOf === id ? message : undefined,
            METRICS_MS,
            `did not answer within ${METRICS_MS} ms`,
          );
          if (answer.error !== undefined) throw new Error(answer.error);
          return { parts: answer.parts ?? [], unread: answer.unread ?? [] };
        };
        return [{ name: `engine ${engine.index}`, read }];
      }),
    );
  }

  /** Starts `engine`; resolves once it listens, rejects if it exits first. */
  private start(engine: EngineProcess): Promise<void> {
    const child = fork(ENGINE_CHILD, [], {
      env: { ...process.env, WORQ_ENGINE_CHILD: JSON.stringify({ config: this.configOf(engine.index) }) },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    engine.child = child;
    return new Promise<void>((listening, failed) => {
      const timer = setTimeout(
        () => failed(new Error(`engine ${engine.index} did not listen within ${ENGINE_START_MS} ms`)),
        ENGINE_START_MS,
      );
      const onListening = (message: { grpcPort?: number; httpPort?: number; faktoryPort?: number; workqPort?: number }) => {
        if (message.grpcPort === undefined) return;
        child.off("message", onListening);
        clearTimeout(timer);
        engine.grpcAddress = `${this.advertised}:${message.grpcPort}`;
        engine.httpAddress = `${this.advertised}:${message.httpPort}`;
        engine.faktoryAddress = message.faktoryPort === undefined ? undefined : `${this.advertised}:${message.faktoryPort}`;
        engine.workqAddress = message.workqPort === undefined ? undefined : `${this.advertised}:${message.workqPort}`;
        engine.servingSince = Date.now();
        // A new process learns whether the others want its ends' hints (it starts as one that waits for nothing).
        if (this.endsHintsWanted(engine) && child.connected) child.send({ endsHintsWanted: true });
        listening();
      };
      child.on("message", onListening);
      child.on("message", (message: MetasQuestion) => {
        if (message.askMetas !== undefined) this.relayMetas(child, message);
      });
      child.on("message", (message: EndsMessage) => {
        if (message.remoteWaiting !== undefined) this.setRemoteWaiting(engine, message.remoteWaiting);
        else if (message.endsIn !== undefined) this.passEndsHint(engine);
      });
      child.on("message", (message: InboxMessage) => {
        if (message.inboxRecords !== undefined) this.passRecords(message.inboxRecords);
        else if (message.inboxApplied !== undefined) this.recordApplied(message.inboxApplied, message.from ?? -1);
      });
      child.on("message", (message: SubmitsQuestion) => {
        if (message.drawSubmits === undefined || !child.connected) return;
        const answer = this.submitBuckets
          ? this.submitBuckets.draw(message.caller, message.need, message.most)
          : { error: "this node counts no submit rate" };
        child.send({ submitsDrawn: message.drawSubmits, ...answer });
      });
      child.once("error", (error) => {
        clearTimeout(timer);
        failed(new Error(`engine ${engine.index} could not be started: ${error.message}`));
      });
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        const wasServing = engine.grpcAddress !== undefined;
        engine.grpcAddress = undefined;
        engine.httpAddress = undefined;
        engine.faktoryAddress = undefined;
        engine.workqAddress = undefined;
        engine.child = undefined;
        this.setRemoteWaiting(engine, false);
        if (!wasServing) return failed(new Error(`engine ${engine.index} exited (${signal ?? code}) before listening`));
        if (this.stopping) return;
        // One that served a good while died of something new: it is not crashing in a loop.
        if (Date.now() - engine.servingSince >= SERVED_WELL_MS) engine.deathsInARow = 0;
        const delayMs = this.restart(engine);
        this.log.error("an engine process exited; starting it again", { engine: engine.index, code, signal, delayMs });
      });
    });
  }

  /**
   * An engine's jobs began (or stopped) waiting for other engines' jobs: each engine is told
   * whether any other engine waits, so it sends hints of its ends only while one does.
   */
  private setRemoteWaiting(engine: EngineProcess, waiting: boolean): void {
    if (engine.remoteWaiting === waiting) return;
    const wantedBefore = this.engines.map((other) => this.endsHintsWanted(other));
    engine.remoteWaiting = waiting;
    this.engines.forEach((other, i) => {
      const wanted = this.endsHintsWanted(other);
      if (wanted !== wantedBefore[i] && other.child?.connected) other.child.send({ endsHintsWanted: wanted });
    });
  }

  private endsHintsWanted(engine: EngineProcess): boolean {
    return this.engines.some((other) => other !== engine && other.remoteWaiting);
  }

  /** An engine committed ends: the engines whose jobs wait for other engines' jobs read theirs at once. */
  private passEndsHint(from: EngineProcess): void {
    for (const engine of this.engines) {
      if (engine !== from && engine.remoteWaiting && engine.child?.connected) engine.child.send({ endsHint: from.index });
    }
  }

  /**
   * An engine's records for other engines: each kept in flight and passed to its engine (a
   * record sent again, its sender not having heard it was applied, is passed again: its
   * engine skips the jobs it holds). The records of one batch come in one message, so all
   * are in flight before any engine sees one.
   */
  private passRecords(texts: string[]): void {
    const records = texts.map((text) => ({ text, record: decodeInboxRecord(text) }));
    for (const { record } of records) {
      if (this.inFlight.has(record.id)) continue;
      this.inFlight.set(
        record.id,
        record.jobs.map(({ meta }) => meta.jid),
      );
      for (const { meta } of record.jobs) this.inFlightJobs.set(meta.jid, meta);
    }
    for (const { text, record } of records) {
      const child = this.engines[record.to]?.child;
      if (child?.connected && this.engines[record.to]!.grpcAddress !== undefined) child.send({ applyInbox: text });
    }
  }

  /** An engine stored a record's jobs: the record leaves the flight, and its sender forgets it. */
  private recordApplied(id: string, from: number): void {
    for (const jid of this.inFlight.get(id) ?? []) this.inFlightJobs.delete(jid);
    this.inFlight.delete(id);
    const sender = this.engines[from]?.child;
    if (sender?.connected) sender.send({ recordApplied: id });
  }

  /**
   * An engine asks for the stored metas of jobs in another engine's partition (its jobs wait
   * for them): asked of that engine, its answer (or why there is none) passed back. A job
   * still in a record in flight when asked, which the engine may not hold yet, is answered
   * as the record holds it.
   */
  private relayMetas(asker: ChildProcess, question: MetasQuestion): void {
    const inFlight = question.jids.map((jid) => this.inFlightJobs.get(jid));
    const reply = (answer: { metas?: unknown[]; error?: string }) => {
      if (answer.metas) answer.metas = answer.metas.map((meta, i) => meta ?? inFlight[i] ?? null);
      if (asker.connected) asker.send({ metasAnswer: question.askMetas, ...answer });
    };
    const holder = this.engines[question.partition];
    const child = holder?.child;
    if (!child || holder.grpcAddress === undefined) return reply({ error: `engine ${question.partition} is not serving now` });
    const id = ++this.asked;
    askOverIpc(
      child,
      { readMetas: id, jids: question.jids },
      (message: { metasRead?: number; metas?: unknown[]; error?: string }) => (message.metasRead === id ? message : undefined),
      METRICS_MS,
      `engine ${question.partition} did not answer within ${METRICS_MS} ms`,
    ).then(
      (answer) => reply(answer.error === undefined ? { metas: answer.metas ?? [] } : { error: answer.error }),
      (error: Error) => reply({ error: error.message }),
    );
  }

  /** Starts `engine` again after its backoff; returns that delay. */
  private restart(engine: EngineProcess): number {
    const delayMs = Math.min(RESTART_MS[0] * 2 ** engine.deathsInARow, RESTART_MS[1]);
    engine.deathsInARow++;
    engine.restarts++;
    setTimeout(() => {
      if (this.stopping) return;
      this.start(engine).then(
        () => this.log.info("engine process serving again", { engine: engine.index }),
        (error: Error) => {
          this.log.error("an engine process did not start", { engine: engine.index, error: error.message });
          if (!this.stopping) this.restart(engine);
        },
      );
    }, delayMs).unref();
    return delayMs;
  }
}
