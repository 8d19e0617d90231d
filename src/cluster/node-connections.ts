import type { ConnectionEvent } from "../transport/connection-caps.js";

/**
 * The connections of a routing node's own ports (gRPC, HTTP, Faktory, Workq), counted as a
 * server counts its own, for the node's /metrics beside its partitions' figures: open now by
 * port, and closed by a cap by port and reason. Their own names (worq_node_…) keep them
 * apart from the same figures of the partitions' servers, which the node shows labelled.
 */
export class NodeConnections {
  private readonly open = new Map<string, number>();
  private readonly refused = new Map<string, number>();

  /** A port's connection event, as its caps report it. */
  observe(port: string, event: ConnectionEvent): void {
    if (event === "opened") this.open.set(port, (this.open.get(port) ?? 0) + 1);
    else if (event === "closed") this.open.set(port, (this.open.get(port) ?? 0) - 1);
    else {
      const key = `port="${port}",reason="${event}"`;
      this.refused.set(key, (this.refused.get(key) ?? 0) + 1);
    }
  }

  /** The counts as Prometheus text. */
  text(): string {
    const lines = [
      "# HELP worq_node_connections_open Connections open now on each of this node's own ports.",
      "# TYPE worq_node_connections_open gauge",
      ...[...this.open].map(([port, count]) => `worq_node_connections_open{port="${port}"} ${count}`),
      "# HELP worq_node_connections_refused_total Connections this node's own ports closed by a cap (--max-connections, --header-timeout).",
      "# TYPE worq_node_connections_refused_total counter",
      ...[...this.refused].map(([labels, count]) => `worq_node_connections_refused_total{${labels}} ${count}`),
    ];
    return `${lines.join("\n")}\n`;
  }
}
