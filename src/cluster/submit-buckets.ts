import pg from "pg";
import type { Logger } from "../log.js";
import type { SharedSubmitBuckets } from "../transport/auth/shared-submit-rate.js";
import type { SubmitDraw, SubmitRate } from "../transport/auth/submit-rate.js";
import { OWNERSHIP_SCHEMA } from "../storage/postgres/partition-ownership.js";

/**
 * --submit-rate counted for a whole partitioned cluster: each caller's token bucket is a row
 * of `worq_shared.submit_buckets`, refilled on the database's clock and drawn from by the
 * `draw_submits` function (partition-ownership.ts makes both), one row lock per draw, so the
 * partitions' servers of every node share it. One connection per node, its own: a draw never
 * waits behind the partitions' commits or the ownership ticks. A draw while the database is
 * out of reach fails (the call gets UNAVAILABLE) and the next one connects again.
 */
export class PostgresSubmitBuckets implements SharedSubmitBuckets {
  private client: Promise<pg.Client> | undefined;
  private closed = false;

  constructor(private readonly options: { url: string; nodeId: string; rate: SubmitRate; log: Logger }) {}

  async draw(caller: string, need: number, most: number): Promise<SubmitDraw> {
    const client = await this.connected();
    try {
      const { rows } = await client.query<{ granted: number; retry_after_ms: number }>(
        `SELECT granted, retry_after_ms FROM ${OWNERSHIP_SCHEMA}.draw_submits($1, $2, $3, $4, $5)`,
        [caller, need, most, this.options.rate.perSecond, this.options.rate.burst],
      );
      return { granted: rows[0]!.granted, retryAfterMs: rows[0]!.retry_after_ms };
    } catch (error) {
      this.drop(client);
      throw error;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.client = undefined;
    await client?.then((c) => c.end()).catch(() => {});
  }

  private connected(): Promise<pg.Client> {
    if (this.closed) return Promise.reject(new Error("the node is stopping"));
    this.client ??= (async () => {
      const client = new pg.Client({ connectionString: this.options.url, application_name: `worq-submit-rate:${this.options.nodeId}` });
      client.on("error", (error) => {
        this.options.log.warn("submit rate connection lost", { error: error.message });
        this.drop(client);
      });
      await client.connect();
      return client;
    })().catch((error: unknown) => {
      this.client = undefined;
      throw error;
    });
    return this.client;
  }

  /** Forgets a connection that failed: the next draw makes a new one. */
  private drop(client: pg.Client): void {
    const current = this.client;
    void current?.then((c) => {
      if (c !== client) return;
      this.client = undefined;
      void c.end().catch(() => {});
    });
  }
}
