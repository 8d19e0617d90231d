import { fork } from "node:child_process";
import { closeSync, fdatasyncSync, openSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { trackProcess } from "./cleanup.mjs";
import { latencySummary } from "./stats.mjs";

/**
 * The floors W2's latencies are judged against, measured in the same run with W2's pacing
 * (one call at a time, 50 unrecorded warm-up calls, a U(0, 10 ms) pause after each): a
 * grpc-js unary echo between two processes (what any Node gRPC server costs here before
 * Worq's own work), and a paced 8 KiB write + fdatasync in the servers' temp dir (what one
 * durable commit costs).
 */

const identity = (bytes) => bytes;

/** A unary method with identity codecs: the bytes go through untouched. */
export const ECHO = {
  path: "/floor.Echo/Echo",
  requestStream: false,
  responseStream: false,
  requestSerialize: identity,
  requestDeserialize: identity,
  responseSerialize: identity,
  responseDeserialize: identity,
};

const SERVER_FLAG = "--grpc-echo-server";

if (process.argv[2] === SERVER_FLAG) {
  // Child: a bare grpc-js echo server (no interceptors), telling the parent its port.
  const server = new grpc.Server();
  server.addService({ echo: ECHO }, { echo: (call, callback) => callback(null, call.request) });
  server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, port) => (error ? process.exit(1) : process.send(port)));
}

/** Starts the echo server (method path ECHO.path) in a process of its own: its port, and the process. */
export async function startEchoProcess() {
  const child = trackProcess(fork(new URL(import.meta.url).pathname, [SERVER_FLAG], { stdio: "inherit" }));
  const port = await new Promise((resolve, reject) => {
    child.once("message", resolve);
    child.once("exit", (code) => reject(new Error(`grpc echo server exited (${code})`)));
  });
  return { port, child };
}

/** The echo server with a grpc-js client: `call(bytes)` echoes through it, `close()` stops both ends. */
export async function startEchoServer() {
  const { port, child } = await startEchoProcess();
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  return {
    call: (bytes) =>
      new Promise((resolve, reject) =>
        client.makeUnaryRequest(ECHO.path, identity, identity, bytes, (error, reply) => (error ? reject(error) : resolve(reply))),
      ),
    close: () => {
      client.close();
      child.kill();
    },
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** `samples` timings of `fn` (ms) with W2's pacing. */
async function paced(samples, fn) {
  for (let i = 0; i < 50; i++) await fn(i);
  const ms = [];
  for (let i = 0; i < samples; i++) {
    const t0 = performance.now();
    await fn(i);
    ms.push(performance.now() - t0);
    await sleep(Math.random() * 10);
  }
  return latencySummary(ms);
}

/** One floor measurement: the echo's and the paced fdatasync's latency summaries. */
export async function measureFloors(samples, dir) {
  const echo = await startEchoServer();
  const payload = Buffer.alloc(100, 1); // about a W2 job's size
  let echoSummary;
  try {
    echoSummary = await paced(samples, () => echo.call(payload));
  } finally {
    echo.close();
  }
  const path = join(dir, "floor-fdatasync");
  const fd = openSync(path, "w");
  const block = Buffer.alloc(8192, 1);
  try {
    const fdatasync = await paced(samples, (i) => {
      writeSync(fd, block, 0, block.length, (i % 16) * 8192);
      fdatasyncSync(fd);
    });
    return { echo: echoSummary, fdatasync };
  } finally {
    closeSync(fd);
    rmSync(path, { force: true });
  }
}
