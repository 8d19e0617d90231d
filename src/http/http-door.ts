import type { IncomingMessage } from "node:http";
import { isIP } from "node:net";
import { isLoopback, type ServerConfig } from "../config.js";
import { parseRequestTarget, type RequestTarget } from "./request-target.js";

/** Which `Host` names the HTTP port answers (see hostRule). */
export interface HostRule {
  /** Whether a request naming `hostname` (lower case, no port or brackets) is served. */
  accepts(hostname: string): boolean;
  /** Said to a client whose Host is refused: what is accepted and how to accept more. */
  describe(): string;
}

/** A refused request: HTTP status, Connect-style code, message naming what to fix. */
export interface DoorRefusal {
  status: number;
  code: string;
  message: string;
}

const ALLOW_MORE = "to accept other names, start the server with --http-allowed-hosts <names> (WORQ_HTTP_ALLOWED_HOSTS)";

/**
 * The names a server's HTTP port answers to, against DNS rebinding: a web page on an
 * attacker's name that resolves to 127.0.0.1 reaches a loopback server, but its requests
 * carry the attacker's name in `Host`. A server bound to a loopback address therefore
 * answers only loopback names (localhost, *.localhost, 127.x.x.x, ::1) and `allowed`; bound
 * elsewhere it answers any name unless `allowed` is given (then only those and loopback
 * names). `allowed` holds exact names, or `*` for any.
 */
export function hostRule(bindLoopback: boolean, allowed: readonly string[]): HostRule {
  const names = new Set(allowed.map((name) => bareHostname(name)));
  const any = names.has("*") || (!bindLoopback && names.size === 0);
  return {
    accepts: (hostname) => any || isLoopbackName(hostname) || names.has(hostname),
    describe: () =>
      names.size === 0
        ? `this server binds a loopback address and answers only localhost, *.localhost, 127.0.0.1 and [::1]; ${ALLOW_MORE}`
        : `this server answers ${[...names].join(", ")} and loopback names; ${ALLOW_MORE}`,
  };
}

/** The host rule of a server's config: its bind address, --http-allowed-hosts, and a cluster node's advertised host (the other nodes and clients use it). */
export function hostRuleOf(config: Pick<ServerConfig, "host" | "httpAllowedHosts" | "cluster">): HostRule {
  const advertised = config.cluster ? [config.cluster.advertiseHost] : [];
  return hostRule(isLoopback(config.host), [...(config.httpAllowedHosts ?? []), ...advertised]);
}

/**
 * The checks every request passes before any route sees it: a request-target that parses,
 * a `Host` header the server answers to, and for state-changing methods no foreign `Origin`
 * (a page on another site may not post here, whatever its content type). Returns the parsed
 * target, or the refusal to send.
 */
export function checkDoor(request: IncomingMessage, hosts: HostRule): RequestTarget | DoorRefusal {
  const target = parseRequestTarget(request.url);
  if (!target) return refusal(400, "invalid_argument", "request target: not a path (/…), an absolute http(s) URL or *");
  const host = request.headers.host;
  // Health probes (load balancers, orchestrators) name the node by address; /healthz tells nothing.
  if (request.method === "GET" && target.path === "/healthz") return target;
  if (host === undefined) return refusal(400, "invalid_argument", "Host header: missing");
  const hostname = hostnameOf(host);
  if (hostname === undefined)
    return refusal(400, "invalid_argument", `Host header: ${JSON.stringify(host.slice(0, 100))} is not a host[:port]`);
  if (!hosts.accepts(hostname))
    return refusal(403, "permission_denied", `Host header: ${JSON.stringify(hostname.slice(0, 100))} is refused: ${hosts.describe()}`);
  const origin = request.headers.origin;
  if (origin !== undefined && request.method !== "GET" && request.method !== "HEAD" && !isSameOrigin(origin, host)) {
    return refusal(
      403,
      "permission_denied",
      `Origin header: ${JSON.stringify(origin.slice(0, 100))} is another site; only pages of this server may send ${request.method} requests`,
    );
  }
  return target;
}

/** Whether `result` of checkDoor is a refusal. */
export function isRefusal(result: RequestTarget | DoorRefusal): result is DoorRefusal {
  return "status" in result;
}

function refusal(status: number, code: string, message: string): DoorRefusal {
  return { status, code, message };
}

/** The name in a Host header (lower case, without port, brackets or trailing dot); undefined when it is not host[:port]. */
export function hostnameOf(host: string): string | undefined {
  const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]+)(?::\d{0,5})?$/.exec(host);
  // Routes build URLs on it (Connect does): it must be a valid URL authority too.
  if (!match || !URL.canParse(`http://${host}/`)) return undefined;
  const name = bareHostname(match[1]!);
  return name.startsWith("[") || (name.includes(":") && isIP(name) !== 6) ? undefined : name;
}

function bareHostname(name: string): string {
  return name
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, "")
    .replace(/\.$/, "");
}

function isLoopbackName(hostname: string): boolean {
  return (
    hostname === "localhost" ||
    hostname.endsWith(".localhost") ||
    hostname === "::1" ||
    (isIP(hostname) === 4 && hostname.startsWith("127."))
  );
}

/** Whether a browser's `Origin` is the server the request was sent to (same host and port). */
function isSameOrigin(origin: string, host: string): boolean {
  if (!URL.canParse(origin)) return false; // "null" (sandboxed frames, file: pages) among them
  const url = new URL(origin);
  if (url.protocol !== "http:" && url.protocol !== "https:") return false;
  return URL.canParse(`${url.protocol}//${host}`) && new URL(`${url.protocol}//${host}`).host === url.host;
}
