import type { Logger } from "../log.js";
import type { SharedSubmitBuckets } from "../transport/auth/shared-submit-rate.js";
import type { SubmitDraw, SubmitRate } from "../transport/auth/submit-rate.js";
import { OWNERSHIP_SCHEMA } from "../storage/postgres/partition-ownership.js";
import { LazyPgClient } from "./lazy-pg-client.js";

/**
 * --submit-rate counted for a whole partitioned cluster: each caller's token bucket is a row
 * of `worq_shared.submit_buckets`, refilled on the database's clock and drawn from by the
 * `draw_submits` function (partition-ownership.ts makes both), one row lock per draw, so the
 * partitions' servers of every node share it. One connection per node, its own: a draw never
 * waits behind the partitions' commits or the ownership ticks. A draw while the database is
 * out of reach fails (the call gets UNAVAILABLE) and the next one connects again.
 */
export class PostgresSubmitBuckets implements SharedSubmitBuckets {
  private readonly connection: LazyPgClient;

  constructor(private readonly options: { url: string; nodeId: string; rate: SubmitRate; log: Logger }) {
    this.connection = new LazyPgClient({
      url: options.url,
      applicationName: `worq-submit-rate:${options.nodeId}`,
      onLost: (error) => options.log.warn("submit rate connection lost", { error: error.message }),
    });
  }

  async draw(caller: string, need: number, most: number): Promise<SubmitDraw> {
    const client = await this.connection.get();
    try {
      const { rows } = await client.query<{ granted: number; retry_after_ms: number }>(
        `SELECT granted, retry_after_ms FROM ${OWNERSHIP_SCHEMA}.draw_submits($1, $2, $3, $4, $5)`,
        [caller, need, most, this.options.rate.perSecond, this.options.rate.burst],
      );
      return { granted: rows[0]!.granted, retryAfterMs: rows[0]!.retry_after_ms };
    } catch (error) {
      this.connection.drop(client);
      throw error;
    }
  }

  close(): Promise<void> {
    return this.connection.end(true);
  }
}
