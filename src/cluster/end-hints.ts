import pg from "pg";
import type { Logger } from "../log.js";
import { coalesced } from "../coalesced-call.js";

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
  private listener: Promise<pg.Client> | undefined;
  private sender: Promise<pg.Client> | undefined;
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
    if (waiting) this.listener ??= this.listen();
    else this.dropListener();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.look);
    const clients = [this.listener, this.sender];
    [this.listener, this.sender] = [undefined, undefined];
    await Promise.all(clients.map((client) => client?.then((c) => c.end()).catch(() => {})));
  }

  private listen(): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: this.options.url, application_name: `${LISTENING}${this.options.nodeId}` });
    const connected = (async () => {
      client.on("error", (error) => {
        this.options.log.warn("end hints: the listening connection was lost", { error: error.message });
        this.lost(connected, client);
      });
      client.on("notification", (message) => {
        if (message.payload !== this.options.nodeId) this.options.onHint();
      });
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
      return client;
    })();
    connected.catch(() => this.lost(connected, client));
    return connected;
  }

  /** The listening connection failed: another is opened a second later while the waits last. */
  private lost(listener: Promise<pg.Client>, client: pg.Client): void {
    void client.end().catch(() => {});
    if (this.listener !== listener) return;
    this.listener = undefined;
    setTimeout(() => this.setWaiting(this.waiting), LOOK_EVERY_MS).unref();
  }

  private dropListener(): void {
    const listener = this.listener;
    this.listener = undefined;
    void listener?.then((client) => client.end()).catch(() => {});
  }

  /** Whether another node's listening connection is open now (read every LOOK_EVERY_MS). */
  private async lookForListeners(): Promise<void> {
    try {
      const client = await this.connected();
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
      const client = await this.connected();
      await client.query("SELECT pg_notify($1, $2)", [CHANNEL, this.options.nodeId]);
    } catch {
      // A hint lost: the waiting partitions read at their next timed read.
    }
  }

  private connected(): Promise<pg.Client> {
    if (this.closed) return Promise.reject(new Error("the node is stopping"));
    if (this.sender) return this.sender;
    const client = new pg.Client({ connectionString: this.options.url, application_name: `worq-hints:${this.options.nodeId}` });
    const connected = (async () => {
      client.on("error", () => {
        if (this.sender === connected) this.sender = undefined;
        void client.end().catch(() => {});
      });
      await client.connect();
      return client;
    })();
    connected.catch(() => {
      if (this.sender === connected) this.sender = undefined;
    });
    return (this.sender = connected);
  }
}
