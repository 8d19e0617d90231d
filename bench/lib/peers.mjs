import { fileURLToPath } from "node:url";

/**
 * The configurations compared. `server` says what to start: a Worq server with its default
 * (durable) settings, or a private redis-server with AOF and the given appendfsync.
 */
export const PEERS = {
  "worq-lib": {
    side: "worq",
    label: "Worq (TS library)",
    dir: "worq-lib",
    server: { kind: "worq" },
    durability: "LevelDB; every acknowledged write fsync'd before the reply (group commit)",
    client: "WorqClient.submit / submitBatch and Worker, defaults (concurrency 50)",
  },
  "worq-raw": {
    side: "worq",
    label: "Worq (raw stubs)",
    dir: "worq-raw",
    server: { kind: "worq" },
    durability: "LevelDB; every acknowledged write fsync'd before the reply (group commit)",
    client: "generated connect-node stubs: one Submit RPC per job (50 in flight), Lease stream with credits 50, one Ack RPC per job",
    // Only W1's single-submit scenario: what one RPC per submit and per ack costs.
    workloads: ["W1"],
    w1Scenarios: ["single"],
    rawStubs: true,
  },
  "worq-raw-grpcjs": {
    side: "worq",
    label: "Worq (raw stubs, grpc-js transport)",
    dir: "worq-raw-grpcjs",
    server: { kind: "worq" },
    durability: "LevelDB; every acknowledged write fsync'd before the reply (group commit)",
    client:
      "the same generated stubs over createGrpcJsTransport (@worq/client/grpc-js): one Submit RPC per job (50 in flight), Lease stream with credits 50, one Ack RPC per job",
    workloads: ["W1"],
    w1Scenarios: ["single"],
    rawStubs: true,
  },
  "worq-raw-link": {
    side: "worq",
    label: "Worq (raw stubs, link transport)",
    dir: "worq-raw-link",
    server: { kind: "worq" },
    durability: "LevelDB; every acknowledged write fsync'd before the reply (group commit)",
    client:
      "the same generated stubs over createWorqLinkTransport (@worq/client, the library's own node:http2 link): one Submit RPC per job (50 in flight), Lease stream with credits 50, one Ack RPC per job",
    workloads: ["W1"],
    w1Scenarios: ["single"],
    rawStubs: true,
  },
  "worq-raw-go": {
    side: "worq",
    label: "Worq (raw stubs, Go grpc-go)",
    dir: "worq-raw-go",
    server: { kind: "worq" },
    durability: "LevelDB; every acknowledged write fsync'd before the reply (group commit)",
    client:
      "generated grpc-go stubs (gen/go), one connection: one Submit RPC per job (50 goroutines), Lease stream with credits 50, one Ack RPC per job",
    workloads: ["W1"],
    w1Scenarios: ["single"],
    rawStubs: true,
    // Built with `go build` on first use (bench/peers/worq-raw-go/run-go.mjs).
    requires: { command: "go", args: ["version"] },
  },
  "worq-raw-python": {
    side: "worq",
    label: "Worq (raw stubs, Python grpcio)",
    dir: "worq-raw-python",
    server: { kind: "worq" },
    durability: "LevelDB; every acknowledged write fsync'd before the reply (group commit)",
    client:
      "generated grpcio stubs (gen/python) on grpc.aio, one channel: one Submit RPC per job (50 tasks), Lease stream with credits 50, one Ack RPC per job",
    workloads: ["W1"],
    w1Scenarios: ["single"],
    rawStubs: true,
    // The venv of scripts/install-test-tools.sh: grpcio and the worq-proto package.
    requires: { command: fileURLToPath(new URL("../../.tools/venv/bin/python", import.meta.url)), args: ["-c", "import grpc"] },
  },
  "worq-faktory": {
    side: "worq",
    label: "Worq (Faktory port, faktory-worker)",
    dir: "faktory-worker",
    server: { kind: "worq" },
    durability: "LevelDB; every acknowledged write fsync'd before the reply (group commit)",
    client:
      "npm faktory-worker 4.7 on --faktory-port: Client.push (pool of 50 connections, 50 in flight) and Worker (concurrency 50: one FETCH at a time, one ACK per job)",
    // Only WF, beside the TS library on the same kind of server.
    workloads: ["WF"],
  },
  "bullmq-everysec": {
    side: "bullmq",
    label: "BullMQ (AOF everysec)",
    dir: "bullmq",
    server: { kind: "redis", appendfsync: "everysec" },
    durability: "Redis AOF, appendfsync everysec (up to ~1 s of acknowledged writes can be lost)",
    client: "Queue.add / addBulk and Worker (concurrency 50), defaults (completed jobs kept)",
  },
  "bullmq-always": {
    side: "bullmq",
    label: "BullMQ (AOF always)",
    dir: "bullmq",
    server: { kind: "redis", appendfsync: "always" },
    durability: "Redis AOF, appendfsync always (fsync before each write is acknowledged)",
    client: "Queue.add / addBulk and Worker (concurrency 50), defaults (completed jobs kept)",
  },
};

// Floors: a raw-stub peer's own client, unchanged, against a node:http2 stand-in that answers
// from memory (bench/lib/stand-in-server.mjs): the most a server on node:http2 could give it here.
for (const [id, rawId, clientName] of [
  ["floor-go", "worq-raw-go", "Go stubs"],
  ["floor-grpcjs", "worq-raw-grpcjs", "TS stubs (grpc-js transport)"],
]) {
  const raw = PEERS[rawId];
  PEERS[id] = {
    ...raw,
    side: "floor",
    label: `Floor: ${clientName} vs a node:http2 stand-in (no engine, no disk)`,
    server: { kind: "stand-in" },
    durability: "none: the stand-in keeps jobs in memory and writes nothing",
    client: `as ${raw.label}`,
  };
}

/** Path of a peer's child script: producer, worker, latency (W2) or scheduled (W5). */
export function peerScript(peerId, kind) {
  return fileURLToPath(new URL(`../peers/${PEERS[peerId].dir}/${kind}.mjs`, import.meta.url));
}

/** Whether `peerId` takes part in `workload` (and, for W1, in `scenario`). */
export function peerRuns(peerId, workload, scenario) {
  const peer = PEERS[peerId];
  if (peer.workloads && !peer.workloads.includes(workload)) return false;
  if (scenario && peer.w1Scenarios && !peer.w1Scenarios.includes(scenario)) return false;
  return true;
}
