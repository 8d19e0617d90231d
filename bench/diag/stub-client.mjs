#!/usr/bin/env node
// Diagnostic, not part of `npm run bench`: what one unary call through the generated stubs
// costs a client, per transport, against a real `worq serve` in its own process: connect-node's
// gRPC transport, createGrpcJsTransport, createWorqLinkTransport, bare grpc-js (same bytes, no
// Connect layer) and the TS library's own HTTP/2 link called directly. GetServerInfo (no disk), 50 calls in flight; client CPU-ms per
// call (process.cpuUsage) and calls/s, two rounds each.
//   npm run build && node bench/diag/stub-client.mjs [calls=5000]
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { createWorqLinkTransport } from "@worq/client";
import { createGrpcJsTransport } from "@worq/client/grpc-js";
import { GrpcLink } from "@worq/client/grpc-link.js";
import { AdminService, GetServerInfoRequestSchema, GetServerInfoResponseSchema } from "@worq/client/gen/worq/v1/admin_service_pb.js";
import { cleanupAll, trackDir } from "../lib/cleanup.mjs";
import { num } from "../lib/table.mjs";
import { startWorqServer } from "../lib/worq-server.mjs";

const calls = Number(process.argv[2] ?? 5000);
const PATH = "/worq.v1.AdminService/GetServerInfo";
const server = await startWorqServer(trackDir(mkdtempSync(join(tmpdir(), "worq-stub-client-"))));
const request = create(GetServerInfoRequestSchema, {});
const requestBytes = Buffer.from(toBinary(GetServerInfoRequestSchema, request));
const viaConnectNode = createClient(AdminService, createGrpcTransport({ baseUrl: `http://${server.address}` }));
const viaGrpcJsTransport = createClient(AdminService, createGrpcJsTransport({ address: server.address }));
const viaLinkTransport = createClient(AdminService, createWorqLinkTransport({ address: server.address }));
const channel = new grpc.Client(server.address, grpc.credentials.createInsecure(), { "grpc.enable_channelz": 0 });
const bare = () =>
  new Promise((resolve, reject) =>
    channel.makeUnaryRequest(
      PATH,
      (m) => Buffer.from(toBinary(GetServerInfoRequestSchema, m)),
      (b) => fromBinary(GetServerInfoResponseSchema, b),
      request,
      new grpc.Metadata(),
      {},
      (error, response) => (error ? reject(error) : resolve(response)),
    ),
  );
const link = new GrpcLink({ address: server.address });
const viaLink = async () => fromBinary(GetServerInfoResponseSchema, await link.unary(PATH, requestBytes));

console.log(`| client (${num(calls)} GetServerInfo calls, 50 in flight) | client CPU-ms per call | calls/s |\n| --- | --- | --- |`);
const clients = [
  ["connect-node createGrpcTransport", () => viaConnectNode.getServerInfo({})],
  ["createGrpcJsTransport", () => viaGrpcJsTransport.getServerInfo({})],
  ["createWorqLinkTransport", () => viaLinkTransport.getServerInfo({})],
  ["bare grpc-js makeUnaryRequest", bare],
  ["the library's link (node:http2)", viaLink],
];
for (const round of [1, 2]) {
  for (const [name, call] of clients) {
    for (let i = 0; i < 500; i++) await call(); // warm-up
    let next = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 50 }, async () => {
        while (next++ < calls) await call();
      }),
    );
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    console.log(`| ${name} (round ${round}) | ${num((cpu.user + cpu.system) / 1000 / calls)} | ${num((calls / ms) * 1000)} |`);
  }
}
await server.stop();
await cleanupAll();
process.exit(0);
