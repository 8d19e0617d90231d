import { readFile } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { join } from "node:path";
import { packageRoot } from "../package-root.js";

/**
 * The dashboard's CSP: only this origin's script, style and API; no inline script or style
 * element, no plugins, no framing (clickjacking), no form posts anywhere.
 */
const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** The built files (dist/dashboard, made by `npm run build`) by request path, with their types. */
const FILES: Record<string, [file: string, type: string]> = {
  "/": ["index.html", "text/html; charset=utf-8"],
  "/app.js": ["app.js", "text/javascript; charset=utf-8"],
  "/app.js.map": ["app.js.map", "application/json; charset=utf-8"],
  "/style.css": ["style.css", "text/css; charset=utf-8"],
  "/favicon.svg": ["favicon.svg", "image/svg+xml"],
};

/**
 * Serves the web dashboard at `/` on the HTTP port: a static page that calls the API (Connect,
 * same origin) from the browser. Returns false when the request is not for one of its files,
 * else the promise of the answer.
 */
export function handleDashboardRoute(request: IncomingMessage, response: ServerResponse, path: string): false | Promise<void> {
  const entry = Object.hasOwn(FILES, path) ? FILES[path] : undefined;
  if (!entry || (request.method !== "GET" && request.method !== "HEAD")) return false;
  const [file, type] = entry;
  return readFile(join(packageRoot(), "dist/dashboard", file)).then(
    (body) => {
      response.writeHead(200, {
        "content-type": type,
        "content-length": body.length,
        "content-security-policy": DASHBOARD_CSP,
        "x-content-type-options": "nosniff",
        "x-frame-options": "DENY",
        "referrer-policy": "no-referrer",
        "cache-control": "no-cache",
      });
      response.end(request.method === "HEAD" ? undefined : body);
    },
    () => {
      response
        .writeHead(503, { "content-type": "text/plain; charset=utf-8", "content-security-policy": DASHBOARD_CSP })
        .end("The dashboard is not built: run `npm run build` (it writes dist/dashboard/).\n");
    },
  );
}
