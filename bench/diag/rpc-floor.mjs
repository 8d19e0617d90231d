#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: the latency floor of one call on this machine,
// against which W2's pickup target (p99 ≤ 1 ms) can be judged.
//   node bench/diag/rpc-floor.mjs [calls]   (after npm run build)
// One call at a time, each measured twice: back to back, and with W2's idle pause
// (U(0, 10 ms) after each call). Over:
// - a bare TCP ping-pong and a bare grpc-js echo (identity codecs, no interceptors), each
//   server in a process of its own: what any Node gRPC server costs here, before Worq;
// - a Worq server: AdminService.GetServerInfo (no disk), a raw Submit, WorqClient.submit.
import { fork } from "node:child_process";
import { mkdtempSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WorqClient } from "@worq/client";
import { cleanupAll, trackDir, trackProcess } from "../lib/cleanup.mjs";
import { startEchoServer } from "../lib/floors.mjs";
import { latencySummary } from "../lib/stats.mjs";
import { num } from "../lib/table.mjs";
import { startWorqServer } from "../lib/worq-server.mjs";
import { openProducer as openLib } from "../peers/worq-lib/adapter.mjs";
import { openProducer as openRaw } from "../peers/worq-raw/adapter.mjs";

if (process.argv[2] === "--tcp-server") {
  // Child: a bare TCP echo server; sends its port to the parent.
  const server = net.createServer((socket) => {
    socket.setNoDelay(true);
    socket.on("data", (data) => socket.write(data));
  });
  server.listen(0, "127.0.0.1", () => process.send(server.address().port));
} else {
  const calls = Number(process.argv[2] ?? 2000);
  const startChildServer = async (flag) => {
    const child = trackProcess(fork(new URL(import.meta.url).pathname, [flag], { stdio: "inherit" }));
    return { child, port: await new Promise((resolve) => child.once("message", resolve)) };
  };
  const time = async (label, fn) => {
    for (let i = 0; i < 100; i++) await fn(i); // warm-up
    const cells = [];
    for (const pause of [false, true]) {
      const ms = [];
      for (let i = 0; i < calls; i++) {
        const t0 = performance.now();
        await fn(i);
        ms.push(performance.now() - t0);
        if (pause) await new Promise((resolve) => setTimeout(resolve, Math.random() * 10));
      }
      const s = latencySummary(ms);
      cells.push(`${num(s.p50)} / ${num(s.p99)} / ${num(s.max)}`);
    }
    console.log(`| ${label} | ${cells.join(" | ")} |`);
  };
  try {
    console.log(`${calls} calls each, one at a time (ms, p50 / p99 / max):\n`);
    console.log("| Call | Back to back | With W2's pause, U(0, 10 ms) |\n| --- | --- | --- |");

    const tcp = await startChildServer("--tcp-server");
    const socket = net.connect(tcp.port, "127.0.0.1");
    socket.setNoDelay(true);
    await new Promise((resolve) => socket.once("connect", resolve));
    let answered;
    socket.on("data", () => answered());
    await time("TCP ping-pong, 5 bytes (bare Node server)", () => new Promise((resolve) => ((answered = resolve), socket.write("hello"))));
    socket.destroy();
    tcp.child.kill();

    const echo = await startEchoServer();
    const payload = Buffer.from("hello");
    await time("grpc-js unary echo (bare grpc-js server)", () => echo.call(payload));
    echo.close();

    const server = await startWorqServer(join(trackDir(mkdtempSync(join(tmpdir(), "worq-rpc-floor-"))), "data"));
    const client = new WorqClient({ address: server.address });
    const raw = await openRaw({ address: server.address, queue: "floor" });
    const lib = await openLib({ address: server.address, queue: "floor" });
    await time("Worq AdminService.GetServerInfo (Connect client, no disk)", () => client.admin.getServerInfo({}));
    await time("Worq ProducerService.Submit (raw connect-node stub, fsync'd)", (i) => raw.submitOne(i));
    await time("Worq WorqClient.submit (grpc-js, fsync'd)", (i) => lib.submitOne(i));
    await server.stop();
  } finally {
    await cleanupAll();
  }
}
