import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { Option, type Command } from "commander";
import { contextOf, withGlobalOptions } from "../command-context.js";
import { securityFrom, serverAddress } from "../connection.js";
import { CliError, EXIT, usageError } from "../exit-codes.js";
import { wholeNumber } from "../flag-values.js";
import { JOB_FORMATS, type JobFormat } from "../../formats/index.js";
import { keyValues, print, printJson } from "../output.js";

const DEFAULT_HTTP_PORT = 7420;
const DEFAULT_BATCH = 500;

const EXAMPLES = `
Examples:
  worq import jobs.json                                 a JSON array of Worq (Faktory-style) jobs
  worq import retries.jsonl --format sidekiq --history  Sidekiq jobs, one per line, with their failures
  worq import done.json --format envelope --history     envelopes: done/error ones are stored finished
  worq import - --batch 1000 < jobs.jsonl               JSON lines from stdin, 1000 jobs a request

The jobs go to the server's HTTP port (POST /v1/jobs?format=…; --http <host:port> or WORQ_HTTP
when it is not the --server host's port 7420), --batch at a time; each batch
is stored atomically. A document's jid (job_id) becomes its idempotency key, so running the
same file again after a failure does not import its jobs twice. Without --history the keys
that describe a job's past (failure, retry_count, state…) are not kept: the summary names them.
--history (admin tokens only) keeps them: attempts, the failure, and a finished job's end.
Progress goes to stderr; the summary to stdout (--json: one JSON document).`;

interface ImportFlags {
  format: JobFormat;
  history?: boolean;
  batch?: number;
  http?: string;
}

/** One stored job of an import's answer. */
interface ImportedAnswer {
  jid: string;
  duplicate: boolean;
  state: string | null;
  ignored?: string[];
}

export function registerImport(program: Command): void {
  const command = program
    .command("import")
    .summary("import jobs from a file (JSON array or JSON lines), in batches")
    .description("Imports jobs written by another job server (or exported by worq) from a file, or stdin with '-'.")
    .argument("<file>", "a JSON array of jobs, or one JSON job per line; '-' reads stdin")
    .addOption(new Option("--format <format>", "the jobs' shape").choices([...JOB_FORMATS]).default("worq"))
    .option("--history", "keep each job's past: attempts, failure, a finished job's state and times (needs an admin token)")
    .option("--batch <n>", `jobs per request (default ${DEFAULT_BATCH})`, wholeNumber(1, 10_000))
    .option("--http <host:port>", `the server's HTTP port [WORQ_HTTP] (default: the --server host, port ${DEFAULT_HTTP_PORT})`)
    .addHelpText("after", EXAMPLES);
  withGlobalOptions(command);
  command.action(async (file: string, flags: ImportFlags, self: Command) => {
    const { json } = contextOf(self);
    const documents = readDocuments(file);
    const target = httpTarget(self, flags.http);
    const batchSize = flags.batch ?? DEFAULT_BATCH;
    const path = `/v1/jobs?format=${flags.format}${flags.history ? "&import=history" : ""}`;
    let created = 0;
    let duplicates = 0;
    const ignored = new Map<string, number>();
    const states = new Map<string, number>();
    for (let start = 0; start < documents.length; start += batchSize) {
      const batch = documents.slice(start, start + batchSize);
      const answers = await postBatch(target, path, batch, start);
      for (const answer of answers) {
        if (answer.duplicate) duplicates++;
        else created++;
        if (answer.state) states.set(answer.state, (states.get(answer.state) ?? 0) + 1);
        for (const key of answer.ignored ?? []) ignored.set(key, (ignored.get(key) ?? 0) + 1);
      }
      process.stderr.write(`imported ${start + batch.length}/${documents.length} jobs\n`);
    }
    const summary = {
      jobs: documents.length,
      created,
      duplicates,
      states: Object.fromEntries(states),
      ignored: Object.fromEntries(ignored),
    };
    if (json) return printJson(summary);
    const counted = (map: Map<string, number>) => [...map].map(([key, n]) => `${key} ×${n}`).join(", ");
    print(
      keyValues([
        ["imported", `${documents.length} job${documents.length === 1 ? "" : "s"}`],
        ["created", String(created)],
        ["duplicates", duplicates > 0 ? `${duplicates} (a job with the same id exists already; not created again)` : "0"],
        ["states", states.size > 0 ? counted(states) : undefined],
        ["not kept", ignored.size > 0 ? `${counted(ignored)}${flags.history ? "" : " (--history keeps a job's past)"}` : undefined],
      ]),
    );
  });
}

/** The file's jobs: a JSON array, one JSON object, or JSON lines (one job per non-blank line). */
function readDocuments(file: string): unknown[] {
  let text: string;
  try {
    text = readFileSync(file === "-" ? 0 : file, "utf8");
  } catch (error) {
    throw usageError(`cannot read ${file}: ${(error as Error).message}`);
  }
  const trimmed = text.trim();
  if (trimmed === "") throw usageError(`${file} holds no jobs`);
  try {
    const whole = JSON.parse(trimmed) as unknown;
    return Array.isArray(whole) ? whole : [whole];
  } catch {
    // Not one JSON document: JSON lines.
  }
  const documents: unknown[] = [];
  text.split("\n").forEach((line, i) => {
    if (line.trim() === "") return;
    try {
      documents.push(JSON.parse(line));
    } catch (error) {
      throw usageError(`${file}:${i + 1}: not JSON (${(error as Error).message}); give a JSON array or one JSON job per line`);
    }
  });
  return documents;
}

interface HttpTarget {
  url: URL;
  token?: string | undefined;
  tls?: { ca?: Buffer; cert?: Buffer; key?: Buffer } | undefined;
}

/** Where the HTTP port is: --http, $WORQ_HTTP, else the gRPC server's host on port 7420; TLS and token as for every command. */
function httpTarget(command: Command, flag: string | undefined): HttpTarget {
  const opts = (name: string) => {
    for (let at: Command | null = command; at; at = at.parent) {
      const value = at.opts()[name] as string | boolean | undefined;
      if (value !== undefined) return value;
    }
    return undefined;
  };
  const security = securityFrom({
    token: opts("token") as string | undefined,
    tls: opts("tls") as boolean | undefined,
    tlsCa: opts("tlsCa") as string | undefined,
    tlsCert: opts("tlsCert") as string | undefined,
    tlsKey: opts("tlsKey") as string | undefined,
  });
  const read = (path: string | undefined) => (path === undefined ? undefined : readFileSync(path));
  const tls =
    security.tls || security.tlsCa || security.tlsCert
      ? { ca: read(security.tlsCa), cert: read(security.tlsCert), key: read(security.tlsKey) }
      : undefined;
  let address = flag ?? process.env.WORQ_HTTP;
  if (address === undefined || address.trim() === "") {
    const server = serverAddress(opts("server") as string | undefined).replace(/^https?:\/\//i, "");
    address = `${server.replace(/:\d+$/, "")}:${DEFAULT_HTTP_PORT}`;
  }
  const withScheme = /^https?:\/\//i.test(address) ? address : `${tls ? "https" : "http"}://${address}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw usageError(`--http: ${JSON.stringify(address)} is not host:port`);
  }
  return { url, token: security.token, tls: tls && (Object.fromEntries(Object.entries(tls).filter(([, v]) => v)) as HttpTarget["tls"]) };
}

/** POSTs one batch; the server's refusal becomes a CliError naming the document (by its index in the file). */
function postBatch(target: HttpTarget, path: string, batch: unknown[], offset: number): Promise<ImportedAnswer[]> {
  const body = Buffer.from(JSON.stringify(batch));
  const url = new URL(path, target.url);
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(
      url,
      {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "content-length": body.length,
          ...(target.token ? { authorization: `Bearer ${target.token}` } : {}),
        },
        ...(target.tls ?? {}),
        timeout: 60_000,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let answer: { jobs?: ImportedAnswer[]; code?: string; message?: string } = {};
          try {
            answer = JSON.parse(text) as typeof answer;
          } catch {
            // reported below
          }
          if (response.statusCode === 200 && Array.isArray(answer.jobs)) return resolve(answer.jobs);
          // "[3].created_at: …" and "jobs[3].created_at: …" name a document of this batch: say which of the file it is.
          const message = (answer.message ?? text.slice(0, 300)).replace(
            /^(?:jobs)?\[(\d+)\]\./,
            (_, i: string) => `job ${offset + Number(i) + 1} of the file: `,
          );
          const done =
            offset > 0 ? ` (the ${offset} jobs before this batch were imported; running the import again skips those with a jid)` : "";
          reject(new CliError(`${(answer.code ?? `HTTP ${response.statusCode}`).toUpperCase()}: ${message}${done}`, EXIT.failed));
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error("no answer within 60s")));
    req.on("error", (error) =>
      reject(
        new CliError(
          `cannot reach Worq's HTTP port at ${target.url.host}: ${error.message} (give it with --http <host:port>)`,
          EXIT.unreachable,
        ),
      ),
    );
    req.end(body);
  });
}
