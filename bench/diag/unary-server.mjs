#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: what answering one unary call costs a server, grpc-js's
// own unary path against an answer written on node:http2 directly by a 'stream' listener put in
// front of grpc-js's on the same server, the way Worq's unary lane (src/transport/unary-lane.ts) sits. One grpc-js client; the server in a process of its own.
// Per server: latency one call at a time, the server's CPU per call over those calls, and the
// rate with 50 calls in flight. Run twice each, alternating, as the machine drifts.
//   node bench/diag/unary-server.mjs [calls=3000]
import { fork } from "node:child_process";
import * as grpc from "@grpc/grpc-js";
import { cleanupAll, trackProcess } from "../lib/cleanup.mjs";
import { ECHO } from "../lib/floors.mjs";
import { latencySummary } from "../lib/stats.mjs";
import { num } from "../lib/table.mjs";

const KINDS = { "grpc-js": "grpc-js unary path", direct: "node:http2 directly" };
const kind = process.argv[2];

if (kind in KINDS) {
  // Child: an echo server of one kind; tells the parent its port, then its CPU time when asked.
  const server = new grpc.Server();
  server.addService({ echo: ECHO }, { echo: (call, callback) => callback(null, call.request) });
  server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, port) => {
    if (error) process.exit(1);
    if (kind === "direct") {
      // grpc-js keeps its listeners in a private map (src/transport/grpc-listeners.ts says the same).
      for (const http2Server of server.http2Servers.keys()) {
        const [grpcJs] = http2Server.listeners("stream");
        http2Server.removeAllListeners("stream");
        http2Server.on("stream", (stream, headers) => {
          if (headers[":path"] !== ECHO.path) return grpcJs.call(http2Server, stream, headers);
          const chunks = [];
          stream.on("data", (chunk) => chunks.push(chunk));
          stream.on("end", () => {
            stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true });
            stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0", "grpc-message": "" }));
            stream.end(Buffer.concat(chunks)); // the request's frame is the answer's: an echo
          });
        });
      }
    }
    process.send(port);
  });
  process.on("message", () => {
    const { user, system } = process.cpuUsage();
    process.send((user + system) / 1000);
  });
} else {
  const calls = Number(process.argv[2] ?? 3000);
  const payload = Buffer.alloc(100, 1);
  try {
    console.log(`| Server | p50 ms | p99 ms | server CPU µs per call | calls/s, 50 in flight |\n| --- | --- | --- | --- | --- |`);
    for (const server of ["grpc-js", "direct", "grpc-js", "direct"]) {
      const child = trackProcess(fork(new URL(import.meta.url).pathname, [server], { stdio: "inherit" }));
      const port = await new Promise((resolve) => child.once("message", resolve));
      const cpuMs = () => new Promise((resolve) => (child.once("message", resolve), child.send("cpu")));
      const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
      const call = () =>
        new Promise((resolve, reject) =>
          client.makeUnaryRequest(
            ECHO.path,
            (b) => b,
            (b) => b,
            payload,
            (error, reply) => (error ? reject(error) : resolve(reply)),
          ),
        );
      for (let i = 0; i < 300; i++) await call(); // warm-up
      const cpuBefore = await cpuMs();
      const ms = [];
      for (let i = 0; i < calls; i++) {
        const t0 = performance.now();
        await call();
        ms.push(performance.now() - t0);
      }
      const cpuPerCallUs = ((await cpuMs()) - cpuBefore) * (1000 / calls);
      let started = 0;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: 50 }, async () => {
          while (started++ < 20_000) await call();
        }),
      );
      const rate = 20_000 / ((performance.now() - t0) / 1000);
      const s = latencySummary(ms);
      console.log(`| ${KINDS[server]} | ${num(s.p50)} | ${num(s.p99)} | ${Math.round(cpuPerCallUs)} | ${Math.round(rate)} |`);
      client.close();
      child.kill();
    }
  } finally {
    await cleanupAll();
  }
  process.exit(0);
}
