import { afterEach, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { http2Session, metricSample, rawConnection } from "../support/connections.js";

const metric = (server: TestServer, sample: string) => metricSample(server.httpPort, sample);

describe("connection caps: --max-connections per port, --header-timeout", () => {
  let server: TestServer | undefined;
  const open: { destroy(): void }[] = [];
  afterEach(async () => {
    open.splice(0).forEach((connection) => connection.destroy());
    await server?.close();
    server = undefined;
  });

  it("gRPC port: with --max-connections 2, a third connection is closed at once, counted; a slot freed is taken again", async () => {
    server = await startTestServer({ maxConnectionsPerPort: 2 });
    const first = await http2Session(server.port);
    const second = await http2Session(server.port);
    open.push(first, second);
    const third = await rawConnection(server.port);
    expect(await third.closedWithin(2_000)).toBeLessThan(2_000);
    expect(await metric(server, 'worq_connections_refused_total{port="grpc",reason="over_max_connections"}')).toBe(1);
    expect(await metric(server, 'worq_connections_open{port="grpc"}')).toBe(2);
    first.destroy();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const again = await http2Session(server.port);
    open.push(again);
    expect(again.closed).toBe(false);
    expect(await metric(server, 'worq_connections_refused_total{port="grpc",reason="over_max_connections"}')).toBe(1);
  });

  it("HTTP port: with --max-connections 2, a third connection is closed at once unanswered, counted", async () => {
    server = await startTestServer({ maxConnectionsPerPort: 2 });
    const request = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    const kept = [await rawConnection(server.httpPort, request), await rawConnection(server.httpPort, request)];
    const third = await rawConnection(server.httpPort, request);
    let answered = "";
    third.socket.on("data", (chunk: Buffer) => (answered += chunk.toString()));
    expect(await third.closedWithin(2_000)).toBeLessThan(2_000);
    expect(answered).toBe("");
    kept.forEach((connection) => connection.destroy());
    await Promise.all(kept.map((connection) => connection.closedWithin(2_000)));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await metric(server, 'worq_connections_refused_total{port="http",reason="over_max_connections"}')).toBe(1);
    // The scrape's own connection is the one open.
    expect(await metric(server, 'worq_connections_open{port="http"}')).toBe(1);
  });

  it("gRPC port: a connection that sends nothing, or half the HTTP/2 preface, is closed after --header-timeout; a client that sent its preface stays", async () => {
    server = await startTestServer({ headerTimeoutMs: 300 });
    const silent = await rawConnection(server.port);
    const partial = await rawConnection(server.port, "PRI * HTTP/2.0\r\n");
    const client = await http2Session(server.port);
    open.push(client);
    for (const connection of [silent, partial]) expect(await connection.closedWithin(3_000)).toBeGreaterThanOrEqual(290);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(client.closed).toBe(false);
    expect((await server.admin.getServerInfo({})).version).toMatch(/^\d+\.\d+\.\d+/);
    expect(await metric(server, 'worq_connections_refused_total{port="grpc",reason="header_timeout"}')).toBe(2);
  });

  it("HTTP port: a connection that sends nothing, or part of its request headers, is closed after --header-timeout; a later request's headers are bounded too", async () => {
    server = await startTestServer({ headerTimeoutMs: 300 });
    const silent = await rawConnection(server.httpPort);
    const partial = await rawConnection(server.httpPort, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    for (const connection of [silent, partial]) expect(await connection.closedWithin(3_000)).toBeGreaterThanOrEqual(290);
    expect(await metric(server, 'worq_connections_refused_total{port="http",reason="header_timeout"}')).toBe(2);

    // A keep-alive connection whose second request stalls mid-headers: Node's headersTimeout answers 408 and closes it.
    const kept = await rawConnection(server.httpPort, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let answered = "";
    kept.socket.on("data", (chunk: Buffer) => (answered += chunk.toString()));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(answered).toMatch(/^HTTP\/1\.1 200 /);
    kept.socket.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    expect(await kept.closedWithin(3_000)).toBeGreaterThanOrEqual(790);
    expect(answered).toMatch(/HTTP\/1\.1 408 Request Timeout/);
  });
});
