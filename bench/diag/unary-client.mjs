#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: what one unary call costs a client, grpc-js against
// the TS library's own HTTP/2 link (packages/client/src/grpc-link.ts), both against one bare grpc-js
// echo server in a process of its own. Heap allocated per call (sampled, collected objects
// included) and latency, one call at a time, two rounds each.
//   npm run build && node bench/diag/unary-client.mjs [calls=2000]
import { Session } from "node:inspector/promises";
import * as grpc from "@grpc/grpc-js";
import { GrpcLink } from "@worq/client/grpc-link.js";
import { ECHO, startEchoProcess } from "../lib/floors.mjs";
import { latencySummary } from "../lib/stats.mjs";
import { num } from "../lib/table.mjs";

const identity = (bytes) => bytes;

const calls = Number(process.argv[2] ?? 2000);
const { port, child } = await startEchoProcess();
const request = Buffer.alloc(60);
const channel = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { "grpc.enable_channelz": 0 });
const viaGrpcJs = () =>
  new Promise((resolve, reject) =>
    channel.makeUnaryRequest(ECHO.path, identity, identity, request, new grpc.Metadata(), (error, response) =>
      error ? reject(error) : resolve(response),
    ),
  );
const link = new GrpcLink({ address: `127.0.0.1:${port}` });
const viaLink = () => link.unary(ECHO.path, request);
const session = new Session();
session.connect();
await session.post("HeapProfiler.enable");
console.log("| client | bytes allocated per call | p50 ms | p99 ms |\n| --- | --- | --- | --- |");
for (const [name, call] of [
  ["grpc-js", viaGrpcJs],
  ["GrpcLink (node:http2)", viaLink],
  ["grpc-js", viaGrpcJs],
  ["GrpcLink (node:http2)", viaLink],
]) {
  for (let i = 0; i < 300; i++) await call(); // warm-up
  await session.post("HeapProfiler.startSampling", {
    samplingInterval: 128,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  const ms = [];
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    await call();
    ms.push(performance.now() - t0);
  }
  const { profile } = await session.post("HeapProfiler.stopSampling");
  let bytes = 0;
  const walk = (node) => {
    bytes += node.selfSize;
    node.children.forEach(walk);
  };
  walk(profile.head);
  const s = latencySummary(ms);
  console.log(`| ${name} | ${Math.round(bytes / calls)} | ${num(s.p50)} | ${num(s.p99)} |`);
}
child.kill();
process.exit(0);
