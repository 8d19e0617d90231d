import type { Logger } from "../log.js";
import { LazyPgClient } from "./lazy-pg-client.js";

/** The channel the pokes go on; the payload is the partition whose inbox has a record, or `applied:<partition>:<record id>`. */
const CHANNEL = "worq_inbox";
/** How long a node waits to listen again after its listening connection failed. */
const LISTEN_AGAIN_MS = 1_000;

/**
 * Pokes between the nodes of a partitioned cluster for a SubmitBatch over several partitions
 * (docs/scale-out.md): the partition that committed the batch left records for the others in
 * the database's inbox, and tells each one's owner to apply its record. A partition served
 * on this node is called in-process; another node's hears a `NOTIFY worq_inbox` on the
 * connection each node keeps listening. The word that a record was applied goes back the same
 * way, so the sender answers its client at once. A lost poke is sent again by the sending
 * partition, which looks for its records being applied (and, after a crash, by its next owner).
 */
export class PostgresInboxPokes {
  /** Listens, and sends the node's own pokes too (one connection per node). */
  private readonly listener: LazyPgClient;
  private closed = false;

  constructor(options: {
    url: string;
    nodeId: string;
    log: Logger;
    /** A poke for `partition`: applied by its server if this node serves it. */
    onPoke: (partition: number) => void;
    /** Word that record `id`, sent by `partition`, was applied: told to its server if this node serves it. */
    onApplied: (partition: number, id: string) => void;
  }) {
    this.listener = new LazyPgClient({
      url: options.url,
      applicationName: `worq-inbox:${options.nodeId}`,
      setup: async (client) => {
        client.on("notification", (message) => {
          const [first, partition, id] = (message.payload ?? "").split(":");
          if (first === "applied" && id !== undefined) options.onApplied(Number(partition), id);
          else if (Number.isInteger(Number(first))) options.onPoke(Number(first));
        });
        await client.query(`LISTEN ${CHANNEL}`);
      },
      onLost: (error) => {
        options.log.warn("inbox pokes: the listening connection was lost", { error: error.message });
        this.listenSoon();
      },
    });
    this.listen();
  }

  /** Tells `partition`'s owner, wherever it runs, that its inbox has a record. */
  poke(partition: number): Promise<void> {
    return this.notify(String(partition));
  }

  /** Tells the owner of `partition`, which sent record `id`, that it was applied. */
  applied(partition: number, id: string): Promise<void> {
    return this.notify(`applied:${partition}:${id}`);
  }

  private async notify(payload: string): Promise<void> {
    try {
      const client = await this.listener.get();
      await client.query("SELECT pg_notify($1, $2)", [CHANNEL, payload]);
    } catch {
      // Lost: the sending partition pokes again, and looks for its records, while they wait.
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.listener.end(true);
  }

  private listen(): void {
    if (!this.closed) this.listener.get().catch(() => this.listenSoon());
  }

  private listenSoon(): void {
    setTimeout(() => this.listen(), LISTEN_AGAIN_MS).unref();
  }
}
