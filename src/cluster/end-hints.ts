import type { Logger } from "../log.js";
import { coalesced } from "../coalesced-call.js";
import { LazyPgClient } from "./lazy-pg-client.js";

/** The channel the nodes' end hints go on; the payload is the sending node's id. */
const CHANNEL = "worq_ends";
/** The application_name prefix of a node's listening connection: open only while its partitions wait for others' jobs. */
const LISTENING = "worq-ends:";
/** How often a node looks for other nodes' listening connections. */
const LOOK_EVERY_MS = 1_000;
/** The least time between two hints a node sends: a busy node's ends come as a stream. */
const HINT_GAP_MS = 5;

/**
 * Hints of ends between the nodes of a partitioned cluster (docs/scale-out.md): a node whose
 * partitions' jobs wait for jobs of other partitions holds a connection that LISTENs on
 * `worq_ends`, named so the others see it in pg_stat_activity; a node whose partition commits
 * ends NOTIFYs there (at most one hint per 5 ms) while it sees such a connection of another
 * node, and not at all otherwise, so jobs without such dependencies cost nothing. A hint
 * only moves the waiting partitions' reads up: a lost one (a connection down, a node
 * starting) costs the 250 ms read's delay, never a release.
 */
export class PostgresEndHints {
  /** Open only while this node's partitions wait for others' jobs (setWaiting). */
  private readonly listener: LazyPgClient;
  /** Looks for the other nodes' listeners and sends the hints. */
  private readonly sender: LazyPgClient;
  private othersListen = false;
  /** Whether this node's partitions wait for others' jobs: a listener lost meanwhile is opened again. */
  private waiting = false;
  private readonly look: NodeJS.Timeout;
  private closed = false;
  private readonly notify = coalesced(() => void this.send(), HINT_GAP_MS);

  constructor(
    private readonly options: {
      url: string;
      nodeId: string;
      log: Logger;
      /** Another node's partitions committed ends: the waits of this node's partitions are read. */
      onHint: () => void;
    },
  ) {
    this.listener = new LazyPgClient({
      url: options.url,
      applicationName: `${LISTENING}${options.nodeId}`,
      setup: async (client) => {
        client.on("notification", (message) => {
          if (message.payload !== options.nodeId) options.onHint();
        });
        await client.query(`LISTEN ${CHANNEL}`);
      },
      onLost: (error) => {
        options.log.warn("end hints: the listening connection was lost", { error: error.message });
        this.listenAgainSoon();
      },
    });
    this.sender = new LazyPgClient({ url: options.url, applicationName: `worq-hints:${options.nodeId}` });
    this.look = setInterval(() => void this.lookForListeners(), LOOK_EVERY_MS);
    this.look.unref();
  }

  /** A partition served here committed ends. */
  ended(): void {
    if (this.othersListen) this.notify();
  }

  /** Whether any partition served here waits for jobs of other partitions: listens while one does. */
  setWaiting(waiting: boolean): void {
    this.waiting = waiting;
    if (this.closed) return;
    if (!waiting) void this.listener.end();
    else if (!this.listener.open) this.listener.get().catch(() => this.listenAgainSoon());
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.look);
    await Promise.all([this.listener.end(true), this.sender.end(true)]);
  }

  /** The listening connection failed, or could not be made: another is tried a second later while the waits last. */
  private listenAgainSoon(): void {
    setTimeout(() => this.setWaiting(this.waiting), LOOK_EVERY_MS).unref();
  }

  /** Whether another node's listening connection is open now (read every LOOK_EVERY_MS). */
  private async lookForListeners(): Promise<void> {
    try {
      const client = await this.sender.get();
      const { rows } = await client.query<{ listening: boolean }>(
        "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE $1 AND application_name <> $2) AS listening",
        [`${LISTENING}%`, `${LISTENING}${this.options.nodeId}`],
      );
      this.othersListen = rows[0]!.listening;
    } catch {
      this.othersListen = false; // tried again at the next look
    }
  }

  private async send(): Promise<void> {
    try {
      const client = await this.sender.get();
      await client.query("SELECT pg_notify($1, $2)", [CHANNEL, this.options.nodeId]);
    } catch {
      // A hint lost: the waiting partitions read at their next timed read.
    }
  }
}
