import { ConnectError } from "@connectrpc/connect";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import type { WorqClients } from "../../e2e/support/clients.js";

/**
 * Every way a stored job is read back from a running server, each answering one line per
 * read: the path, and the HTTP status or gRPC code it answered. A job that was accepted
 * must read back on all of them without a 5xx or INTERNAL (checked by `serverFaults`).
 */

/** One read and what it answered. */
export interface ReadOutcome {
  path: string;
  /** HTTP status, or for gRPC "grpc:<code name>" ("grpc:ok" when it answered). */
  answer: string;
}

/** The two ports of a server and its gRPC clients. */
export interface ReadTarget {
  clients: WorqClients;
  httpPort: number;
}

/** Connect JSON (unary POST), as the dashboard and curl call it; answers the status and the parsed body. */
export async function connectJson(
  httpPort: number,
  method: string,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`http://127.0.0.1:${httpPort}/worq.v1.${method}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { unparsed: text };
  }
  return { status: response.status, body: parsed };
}

/** A gRPC call's answer: "grpc:ok" or "grpc:<code>". */
async function grpcAnswer(call: Promise<unknown>): Promise<string> {
  try {
    await call;
    return "grpc:ok";
  } catch (error) {
    return `grpc:${ConnectError.from(error).code}`;
  }
}

const STATE_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(JobState)
    .filter(([, value]) => typeof value === "number")
    .map(([name, value]) => [value, `JOB_STATE_${name}`]),
);

/**
 * Reads one job on every API read path: gRPC GetJob (binary), Connect JSON GetJob,
 * `/v1/jobs/<jid>` in the three formats, and ListJobs (first page) by its queue, by its
 * queue and state, and by its state alone, in both encodings (a page of 20: readAllListings
 * reads every page once at the end).
 */
export async function readJobEverywhere(target: ReadTarget, jid: string, queue: string, state: JobState): Promise<ReadOutcome[]> {
  const { clients, httpPort } = target;
  const outcomes: ReadOutcome[] = [];
  const grpc = async (path: string, call: Promise<unknown>) => outcomes.push({ path, answer: await grpcAnswer(call) });
  const json = async (path: string, method: string, body: unknown) =>
    outcomes.push({ path, answer: String((await connectJson(httpPort, method, body)).status) });
  await grpc("grpc GetJob", clients.admin.getJob({ jid }));
  await json("connect-json GetJob", "AdminService/GetJob", { jid });
  for (const format of ["worq", "sidekiq", "envelope"]) {
    const response = await fetch(`http://127.0.0.1:${httpPort}/v1/jobs/${jid}?format=${format}`);
    await response.arrayBuffer();
    outcomes.push({ path: `GET /v1/jobs/:jid?format=${format}`, answer: String(response.status) });
  }
  for (const request of [{ queue }, { queue, state }, { state }]) {
    const what = Object.keys(request).join("+");
    await grpc(`grpc ListJobs by ${what}`, clients.admin.listJobs({ ...request, pageSize: 20 }));
    await json(`connect-json ListJobs by ${what}`, "AdminService/ListJobs", {
      ...request,
      state: request.state === undefined ? undefined : STATE_NAMES[request.state],
      pageSize: 20,
    });
  }
  return outcomes;
}

/**
 * The Connect JSON calls the dashboard's pages make, with the requests they make them with
 * (src/dashboard/pages): Overview, Queues, Jobs, Scheduled, Retries, Dead, Workers, and a
 * job's own page for `jid`.
 */
export async function readDashboardCalls(httpPort: number, jid: string, queue: string): Promise<ReadOutcome[]> {
  const calls: [string, string, unknown][] = [
    ["Overview", "AdminService/GetServerInfo", {}],
    ["Overview/Queues", "AdminService/ListQueues", { pageSize: 1000 }],
    ["Jobs", "AdminService/ListJobs", { pageSize: 50 }],
    ["Jobs by queue", "AdminService/ListJobs", { pageSize: 50, queue }],
    ["Scheduled", "AdminService/ListJobs", { pageSize: 50, state: "JOB_STATE_DELAYED" }],
    ["Scheduled by queue", "AdminService/ListJobs", { pageSize: 50, state: "JOB_STATE_DELAYED", queue }],
    ["Retries", "AdminService/ListJobs", { pageSize: 50, state: "JOB_STATE_RETRYING" }],
    ["Dead", "AdminService/ListJobs", { pageSize: 50, state: "JOB_STATE_DEAD_LETTER" }],
    ["Workers", "AdminService/ListWorkers", {}],
    ["Workers/running", "AdminService/ListJobs", { state: "JOB_STATE_RUNNING", pageSize: 1000 }],
    ["Job", "AdminService/GetJob", { jid }],
    ["Job/children", "AdminService/ListJobs", { parentJid: jid, pageSize: 100 }],
    ["Job/dependents", "AdminService/ListJobs", { dependsOnJid: jid, pageSize: 100 }],
  ];
  const outcomes: ReadOutcome[] = [];
  for (const [page, method, body] of calls) {
    outcomes.push({ path: `dashboard ${page}: ${method}`, answer: String((await connectJson(httpPort, method, body)).status) });
  }
  return outcomes;
}

/**
 * Walks every page of ListJobs, for every queue and state and for none, in both encodings:
 * a stored job that cannot be encoded fails the page that holds it, wherever it is. Pages of
 * 50, so 50 jobs near a 64 KiB job limit stay under the gRPC send limit.
 */
export async function readAllListings(target: ReadTarget, queues: readonly string[]): Promise<ReadOutcome[]> {
  const { clients, httpPort } = target;
  const outcomes: ReadOutcome[] = [];
  const states = [undefined, ...Object.values(JobState).filter((value): value is JobState => typeof value === "number" && value !== 0)];
  for (const queue of [undefined, ...queues]) {
    for (const state of states) {
      const what = `ListJobs all pages queue=${queue ?? "*"} state=${state === undefined ? "*" : STATE_NAMES[state]}`;
      let token = "";
      do {
        try {
          const page = await clients.admin.listJobs({ queue, state, pageSize: 50, pageToken: token });
          token = page.nextPageToken;
          outcomes.push({ path: `grpc ${what}`, answer: "grpc:ok" });
        } catch (error) {
          outcomes.push({ path: `grpc ${what}`, answer: `grpc:${ConnectError.from(error).code}` });
          token = "";
        }
      } while (token);
      do {
        const { status, body } = await connectJson(httpPort, "AdminService/ListJobs", {
          queue,
          state: state === undefined ? undefined : STATE_NAMES[state],
          pageSize: 50,
          pageToken: token || undefined,
        });
        outcomes.push({ path: `connect-json ${what}`, answer: String(status) });
        token = status === 200 ? String(body.nextPageToken ?? "") : "";
      } while (token);
    }
  }
  return outcomes;
}

/** The outcomes that are server faults: HTTP 5xx, or gRPC INTERNAL (13), UNKNOWN (2) or UNAVAILABLE (14). */
export function serverFaults(outcomes: readonly ReadOutcome[]): ReadOutcome[] {
  return outcomes.filter(({ answer }) => /^5\d\d$/.test(answer) || answer === "grpc:13" || answer === "grpc:2" || answer === "grpc:14");
}
