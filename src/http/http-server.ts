import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { AdminService } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { WorkerService } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import type { WorqServices, PortTls } from "../transport/grpc-server.js";
import { connectWorkerService } from "../transport/worker-service.js";
import type { WorqMetrics } from "./metrics.js";
import type { Engine } from "../engine/engine.js";
import { handleDashboardRoute } from "./dashboard-routes.js";
import { handleJobJsonRoute } from "./job-json-routes.js";
import type { AccessControl } from "../transport/auth/access-control.js";
import { connectAccessInterceptor } from "../transport/auth/http-access.js";
import { replyJsonError } from "./json-answer.js";
import { authorizeHttpRoute } from "./route-access.js";
import { scopedMetricsText } from "../transport/auth/scoped-metrics.js";
import type { Logger } from "../log.js";
import { createConnectRoutes } from "./connect-routes.js";
import { checkDoor, isRefusal, type HostRule } from "./http-door.js";
import { guardRequests, type RequestHandler } from "./request-guard.js";

/** PEM contents for HTTPS; with `ca`, clients must present a certificate it signed. */
export type HttpTlsOptions = PortTls;

export interface HttpServerOptions {
  services: WorqServices;
  engine: Engine;
  metrics: WorqMetrics;
  /** False while starting or stopping: /healthz answers 503. */
  healthy: () => boolean;
  maxRequestBytes: number;
  /** Tokens, roles and submit rate, as on the gRPC port; /healthz stays open. */
  access: AccessControl;
  /** The Host names served (DNS rebinding defence; http-door.ts). */
  hosts: HostRule;
  /** Where a request that fails unexpectedly is logged, with the id its 500 answer names. */
  log: Logger;
  tls?: HttpTlsOptions;
}

/**
 * The HTTP side (port 7420 by default): the same three services over the Connect protocol
 * (JSON or binary over HTTP/1.1, so curl works; gRPC-Web for browsers), the job in the
 * JSON formats at `/v1/jobs` (job-json-routes.ts), `/healthz`, `/metrics`, and the web
 * dashboard at `/` (dashboard-routes.ts). No CORS headers are sent, so browsers on other
 * origins are refused.
 * With `tls` it is HTTPS (HTTP/1.1); `access` guards every route but /healthz and the
 * dashboard's static files (docs/security.md). Before any route, every request passes the
 * door (http-door.ts: a parsable target, a served Host, no foreign Origin on a POST), and
 * the request guard answers whatever a route throws with a logged 500.
 */
export function createHttpServer(options: HttpServerOptions): Server {
  const timing: Interceptor = (next) => async (request) => {
    const started = process.hrtime.bigint();
    const seconds = () => Number(process.hrtime.bigint() - started) / 1e9;
    try {
      const response = await next(request);
      options.metrics.observeRpc(request.method.name, "OK", seconds());
      return response;
    } catch (error) {
      options.metrics.observeRpc(request.method.name, Code[ConnectError.from(error).code] ?? "Unknown", seconds());
      throw error;
    }
  };
  const connect = createConnectRoutes(
    {
      // gRPC proper is served on the gRPC port; here: Connect and gRPC-Web.
      grpc: false,
      acceptCompression: [],
      readMaxBytes: options.maxRequestBytes,
      // A JSON key or enum name this server does not know is refused, naming it, never dropped:
      // a field from a newer contract would otherwise be silently ignored (a unique key, a limit).
      jsonOptions: { ignoreUnknownFields: false },
      // Timing first, so refused calls are counted under their code too.
      interceptors: [timing, connectAccessInterceptor(options.access)],
    },
    (router) => {
      router.service(ProducerService, options.services.producer);
      router.service(WorkerService, connectWorkerService(options.services.worker));
      router.service(AdminService, options.services.admin);
    },
  );
  const handle: RequestHandler = async (request, response) => {
    const target = checkDoor(request, options.hosts);
    if (isRefusal(target)) return replyJsonError(response, target.status, target.code, target.message);
    request.url = target.originForm; // every route, Connect's included, reads the origin-form
    const path = target.path;
    if (request.method === "GET" && path === "/healthz") {
      const healthy = options.healthy();
      response
        .writeHead(healthy ? 200 : 503, { "content-type": "application/json" })
        .end(JSON.stringify({ status: healthy ? "SERVING" : "NOT_SERVING" }));
      return;
    }
    if (request.method === "GET" && path === "/metrics") {
      const caller = authorizeHttpRoute(options.access, "metrics", request, response);
      if (!caller) return;
      const text = await options.metrics.registry.metrics();
      response.writeHead(200, { "content-type": options.metrics.registry.contentType }).end(scopedMetricsText(text, caller.scope));
      return;
    }
    const jobs = handleJobJsonRoute(options.engine, options.maxRequestBytes, request, response, options.access, target);
    if (jobs) return jobs;
    const dashboard = handleDashboardRoute(request, response, path);
    if (dashboard) return dashboard;
    return connect(request, response, path);
  };
  return httpServerFor(options.tls, guardRequests(handle, options.log));
}

/** An HTTP server for `handle`, or HTTPS with `tls` (requiring client certificates when `tls.ca` is set). */
export function httpServerFor(
  tls: HttpTlsOptions | undefined,
  handle: (request: IncomingMessage, response: ServerResponse) => void,
): Server {
  if (!tls) return createServer(handle);
  const { cert, key, ca } = tls;
  return createTlsServer({ cert, key, ...(ca && { ca, requestCert: true, rejectUnauthorized: true }) }, handle);
}

/** Starts `http` listening on host:port; resolves with the bound port. */
export function listenHttp(http: Server, host: string, port: number): Promise<number> {
  return new Promise((ok, fail) => {
    http.once("error", fail);
    http.listen(port, host, () => ok((http.address() as AddressInfo).port));
  });
}
