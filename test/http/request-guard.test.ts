import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log.js";
import { guardRequests, type RequestHandler } from "../../src/http/request-guard.js";

/** A real HTTP server on 127.0.0.1 whose handler is `handle`, guarded, logging into `lines`. */
async function setup(handle: RequestHandler) {
  const stream = new PassThrough();
  const lines: Record<string, unknown>[] = [];
  stream.on("data", (chunk: Buffer) =>
    chunk
      .toString()
      .split("\n")
      .filter(Boolean)
      .forEach((line) => lines.push(JSON.parse(line))),
  );
  const server: Server = createServer(guardRequests(handle, createLogger("info", stream)));
  await new Promise<void>((listening) => server.listen(0, "127.0.0.1", listening));
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/x?token=secret`, lines };
}

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((closed) => server.close(closed));
  }
});

describe("the request guard", () => {
  it.each([
    [
      "throws",
      () => {
        throw new Error("boom: secret cause");
      },
    ],
    [
      "rejects",
      async () => {
        throw new Error("boom: secret cause");
      },
    ],
  ] as [string, RequestHandler][])(
    "a handler that %s: 500 naming a request id, the cause logged at log level error under that id, never sent",
    async (_, handle) => {
      const { url, lines } = await setup(handle);
      const response = await fetch(url);
      expect(response.status).toBe(500);
      expect(response.headers.get("content-type")).toBe("application/json");
      const body = (await response.json()) as { code: string; message: string };
      const requestId = /^internal server error \(request id ([0-9a-f]{16})\)$/.exec(body.message)?.[1];
      expect(body.code).toBe("internal");
      expect(requestId).toBeDefined();
      expect(JSON.stringify(body)).not.toContain("boom");
      await expect.poll(() => lines.length).toBe(1);
      expect(lines[0]).toMatchObject({ level: 50, msg: "request failed", requestId, method: "GET", path: "/x" });
      expect(lines[0]!.error).toMatch(/^Error: boom: secret cause\n {4}at /);
      expect(JSON.stringify(lines[0])).not.toContain("token=secret");
      // The server goes on serving.
      expect((await fetch(url)).status).toBe(500);
    },
  );

  it("a handler that fails after its answer began: the connection is cut (no second status line), the error logged", async () => {
    const { url, lines } = await setup(async (_, response) => {
      response.writeHead(200, { "content-type": "text/plain" });
      response.write("partial");
      await new Promise((later) => setTimeout(later, 10));
      throw new Error("failed mid-answer");
    });
    const response = await fetch(url);
    expect(response.status).toBe(200);
    await expect(response.text()).rejects.toThrow();
    await expect.poll(() => lines.length).toBe(1);
    expect(lines[0]).toMatchObject({ level: 50, msg: "request failed" });
  });
});
