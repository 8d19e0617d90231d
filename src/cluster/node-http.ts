import type { Server } from "node:http";
import type { ServerConfig } from "../config.js";
import type { Logger } from "../log.js";
import { maxMessageBytes, type readTlsFiles } from "../main.js";
import { createConnectRoutes } from "../http/connect-routes.js";
import { handleDashboardRoute } from "../http/dashboard-routes.js";
import { httpServerFor } from "../http/http-server.js";
import { hostRuleOf, checkDoor, isRefusal } from "../http/http-door.js";
import { replyJsonError } from "../http/json-answer.js";
import { guardRequests } from "../http/request-guard.js";
import { authorizeHttpRoute } from "../http/route-access.js";
import type { AccessControl } from "../transport/auth/access-control.js";
import { connectAccessInterceptor } from "../transport/auth/http-access.js";
import { scopedMetricsText } from "../transport/auth/scoped-metrics.js";
import { mergePartitionMetrics, type MetricsRead } from "./metrics-merge.js";
import { routeConnect } from "./node-connect.js";
import { routeJobJson, type JobJsonRouting } from "./node-job-json.js";
import type { RoutedCall } from "./partition-router.js";

/** What the node's HTTP port shows of the node. */
export interface NodeView {
  nodeId: string;
  /** The partitions this node serves now. */
  partitions(): number[];
  /** Calls the node's ports routed to a partition's server. */
  routedCalls(): number;
  /** Each partition served here: what its own /metrics shows now (Prometheus text). */
  partitionMetrics(): Promise<MetricsRead>;
  /** The router's calls, by path. */
  calls: ReadonlyMap<string, RoutedCall>;
  /** The node's own ports' connection counts (Prometheus text). */
  connectionsText(): string;
}

/**
 * A partitioned node's HTTP port: the worq API over Connect and gRPC-Web, routed as on its
 * gRPC port (node-connect.ts), so the dashboard (served here too) and curl see the whole
 * cluster; /healthz, and /metrics of the node with those of the partitions it serves (each
 * sample labelled with its partition: metrics-merge.ts); `/v1/jobs` (the job JSON formats) sent
 * to the HTTP port of the partition that holds the jobs (node-job-json.ts). The door, access
 * checks and request guard are the single server's (http-server.ts).
 */
export function nodeHttp(
  config: ServerConfig,
  access: AccessControl,
  node: NodeView,
  jobJson: Omit<JobJsonRouting, "access" | "maxBodyBytes" | "maxJobBytes">,
  tls: ReturnType<typeof readTlsFiles>,
  log: Logger,
): Server {
  const jobRouting: JobJsonRouting = { ...jobJson, access, maxBodyBytes: maxMessageBytes(config), maxJobBytes: config.maxJobBytes };
  const connect = createConnectRoutes(
    {
      grpc: false,
      acceptCompression: [],
      readMaxBytes: maxMessageBytes(config),
      jsonOptions: { ignoreUnknownFields: false },
      interceptors: [connectAccessInterceptor(access)],
    },
    (router) => routeConnect(router, node.calls),
  );
  return httpServerFor(
    tls,
    guardRequests((request, response) => {
      const door = checkDoor(request, hostRuleOf(config));
      if (isRefusal(door)) return replyJsonError(response, door.status, door.code, door.message);
      request.url = door.originForm;
      const path = door.path;
      if (request.method === "GET" && path === "/healthz") {
        response
          .writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify({ status: "SERVING", node: node.nodeId, role: "partitions", partitions: node.partitions() }));
        return;
      }
      if (request.method === "GET" && path === "/metrics") {
        const caller = authorizeHttpRoute(access, "metrics", request, response);
        if (!caller) return;
        const own =
          "# HELP worq_partitions_served The partitions this node serves now.\n" +
          `# TYPE worq_partitions_served gauge\nworq_partitions_served ${node.partitions().length}\n` +
          "# HELP worq_node_routed_calls_total Calls this node's ports took and routed to a partition's server (a library routing by partition sends none).\n" +
          `# TYPE worq_node_routed_calls_total counter\nworq_node_routed_calls_total ${node.routedCalls()}\n` +
          node.connectionsText();
        void node
          .partitionMetrics()
          .then(({ parts, unread }) => {
            if (unread.length > 0) log.warn("some partitions' figures are missing from this scrape", { unread });
            const missing =
              "# HELP worq_node_metrics_unread Sources of this node's partition figures (an engine, a partition's server) that did not answer this scrape: their figures are missing from it.\n" +
              `# TYPE worq_node_metrics_unread gauge\nworq_node_metrics_unread ${unread.length}\n`;
            // A token limited to some queues sees their figures only, as on a single server.
            response
              .writeHead(200, { "content-type": "text/plain; version=0.0.4" })
              .end(own + missing + scopedMetricsText(mergePartitionMetrics(parts), caller.scope));
          })
          .catch((error: Error) => {
            // A bug in the joining, not a partition's silence (that is `unread`): said, never the end of the process.
            log.error("joining the partitions' metrics failed", { error: error.stack ?? error.message });
            if (!response.headersSent) replyJsonError(response, 500, "internal", "the partitions' metrics could not be joined");
          });
        return;
      }
      const jobRoute = routeJobJson(jobRouting, request, response, door);
      if (jobRoute) return jobRoute;
      return handleDashboardRoute(request, response, path) || connect(request, response, path);
    }, log),
  );
}
