import type { Logger } from "../log.js";
import { LazyPgClient } from "./lazy-pg-client.js";

/** The channel the pokes go on; the payload is the partition whose inbox has a record. */
const CHANNEL = "worq_inbox";
/** How long a node waits to listen again after its listening connection failed. */
const LISTEN_AGAIN_MS = 1_000;

/**
 * Pokes between the nodes of a partitioned cluster for a SubmitBatch over several partitions
 * (docs/scale-out.md): the partition that committed the batch left records for the others in
 * the database's inbox, and tells each one's owner to apply its record. A partition served
 * on this node is called in-process; another node's hears a `NOTIFY worq_inbox` on the
 * connection each node keeps listening. A lost poke is sent again by the sending partition,
 * which looks for its records being applied (and, after a crash, by its next owner).
 */
export class PostgresInboxPokes {
  private readonly listener: LazyPgClient;
  private readonly sender: LazyPgClient;
  private closed = false;

  constructor(options: {
    url: string;
    nodeId: string;
    log: Logger;
    /** A poke for `partition`: applied by its server if this node serves it. */
    onPoke: (partition: number) => void;
  }) {
    this.listener = new LazyPgClient({
      url: options.url,
      applicationName: `worq-inbox:${options.nodeId}`,
      setup: async (client) => {
        client.on("notification", (message) => {
          const partition = Number(message.payload);
          if (Number.isInteger(partition)) options.onPoke(partition);
        });
        await client.query(`LISTEN ${CHANNEL}`);
      },
      onLost: (error) => {
        options.log.warn("inbox pokes: the listening connection was lost", { error: error.message });
        this.listenSoon();
      },
    });
    this.sender = new LazyPgClient({ url: options.url, applicationName: `worq-pokes:${options.nodeId}` });
    this.listen();
  }

  /** Tells `partition`'s owner, wherever it runs, that its inbox has a record. */
  async poke(partition: number): Promise<void> {
    try {
      const client = await this.sender.get();
      await client.query("SELECT pg_notify($1, $2)", [CHANNEL, String(partition)]);
    } catch {
      // Lost: the sending partition pokes again while its record waits.
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([this.listener.end(true), this.sender.end(true)]);
  }

  private listen(): void {
    if (!this.closed) this.listener.get().catch(() => this.listenSoon());
  }

  private listenSoon(): void {
    setTimeout(() => this.listen(), LISTEN_AGAIN_MS).unref();
  }
}
