/**
 * The client package as a user gets it: `npm pack` of packages/client, that tarball installed
 * into an empty directory from the registry, and the quickstart of the package's own README
 * (read from the installed copy, exactly as npm shows it) run against a real `worq serve`.
 * The installed tree must hold none of the server's libraries. The README's generated-stubs
 * example runs as written (createWorqLinkTransport) and, with @grpc/grpc-js added (an optional
 * peer), over @worq/client/grpc-js.
 */
import { execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { spawnServer, WORQ_CLI, type ServerProcess } from "../e2e/support/server-process.js";
import { commandWorks, toolAvailable } from "../support/require-tool.js";

const ROOT = join(import.meta.dirname, "../..");
const run = promisify(execFile);
const NPM = process.platform === "win32" ? "npm.cmd" : "npm";

const registryReachable = toolAvailable(
  "packed client package",
  () => commandWorks(NPM, ["ping"]),
  "npm cannot reach its registry (npm ping failed)",
);

/** The server's own libraries: a worker that installs the client must get none of them. */
const SERVER_ONLY = ["level", "classic-level", "pg", "prom-client", "pino", "commander", "@grpc/grpc-js", "@grpc/reflection"];

/** The first ```ts block of a Markdown file. */
function firstTsBlock(markdown: string): string {
  const block = /```ts\n([\s\S]*?)```/.exec(markdown);
  if (!block) throw new Error("no ```ts block in the README");
  return block[1]!;
}

/** The README's TypeScript as plain JavaScript: its only TypeScript is non-null assertions (`job!.jid`). */
function stripTypes(ts: string): string {
  return ts.replaceAll(/(\w)!\./g, "$1.");
}

/** Every package name under a node_modules directory, nested ones included. */
function installedPackages(nodeModules: string): string[] {
  let entries: string[];
  try {
    entries = readdirSync(nodeModules);
  } catch {
    return [];
  }
  return entries
    .filter((entry) => !entry.startsWith("."))
    .flatMap((entry) => (entry.startsWith("@") ? readdirSync(join(nodeModules, entry)).map((name) => `${entry}/${name}`) : [entry]))
    .flatMap((name) => [name, ...installedPackages(join(nodeModules, name, "node_modules"))]);
}

describe("@worq/client, packed and installed as a user would", () => {
  const dir = mkdtempSync(join(tmpdir(), "worq-packed-client-"));
  let server: ServerProcess | undefined;
  afterAll(async () => {
    server?.child.kill("SIGKILL");
    await server?.exited;
    rmSync(dir, { recursive: true, force: true });
  });

  it.skipIf(!registryReachable)(
    "the tarball installs without the server's libraries, its README's quickstart runs a job to COMPLETED, and so does its generated-stubs example over either transport",
    async () => {
      const { stdout: packed } = await run(NPM, ["pack", "--workspace", "@worq/client", "--pack-destination", dir, "--json"], {
        cwd: ROOT,
      });
      const [{ filename, files }] = JSON.parse(packed) as [{ filename: string; files: { path: string }[] }];
      const paths = files.map((file) => file.path);
      expect(paths).toEqual(
        expect.arrayContaining(["package.json", "README.md", "dist/index.js", "dist/index.d.ts", "dist/gen/worq/v1/job_pb.js"]),
      );
      expect(paths.filter((path) => !path.startsWith("dist/") && !["package.json", "README.md"].includes(path))).toEqual([]);

      const app = join(dir, "app");
      mkdirSync(app);
      writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
      await run(NPM, ["install", "--prefer-offline", "--no-audit", "--no-fund", join(dir, filename)], { cwd: app, timeout: 45_000 });

      const installed = installedPackages(join(app, "node_modules"));
      expect(installed).toContain("@worq/client");
      expect(installed).toContain("@connectrpc/connect-node");
      expect(installed.filter((name) => SERVER_ONLY.includes(name))).toEqual([]);

      // The quickstart from the README inside the installed package, its address pointed at this test's server.
      const readme = readFileSync(join(app, "node_modules/@worq/client/README.md"), "utf8");
      const quickstart = firstTsBlock(readme);
      expect(quickstart).toContain('from "@worq/client"');
      expect(quickstart.split('"127.0.0.1:7419"')).toHaveLength(3); // the client's address and the worker's
      server = await spawnServer(join(dir, "data"));
      const address = `127.0.0.1:${server.port}`;
      writeFileSync(join(app, "quickstart.mjs"), quickstart.replaceAll('"127.0.0.1:7419"', JSON.stringify(address)));

      const worker = spawn(process.execPath, ["quickstart.mjs"], { cwd: app, stdio: ["ignore", "pipe", "pipe"] });
      let output = "";
      worker.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
      worker.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => worker.once("exit", (code) => resolve(code)));
      try {
        const cli = async (...args: string[]) => (await run(process.execPath, [WORQ_CLI, ...args, "--server", address, "--json"])).stdout;
        let completed: { jid: string }[] = [];
        for (const deadline = Date.now() + 20_000; completed.length === 0 && Date.now() < deadline;) {
          await new Promise((resolve) => setTimeout(resolve, 200));
          completed = (JSON.parse(await cli("jobs", "--queue", "mail", "--state", "completed")) as { jobs: { jid: string }[] }).jobs;
        }
        expect(completed, output).toHaveLength(1);
        const job = JSON.parse(await cli("get", completed[0]!.jid)) as { type: string; state: string; attempt: number; result: string };
        expect([job.type, job.state, job.attempt]).toEqual(["email.send", "JOB_STATE_COMPLETED", 1]);
        expect(Buffer.from(job.result, "base64").toString()).toBe("sent to ada@example.com");
        worker.kill("SIGTERM"); // the quickstart's worker handles signals: it stops and exits 0
        expect(await exited, output).toBe(0);
      } finally {
        if (worker.exitCode === null) worker.kill("SIGKILL");
      }

      // The README's generated-stubs example (submit, lease, ack): as written, over createWorqLinkTransport;
      // then, with @grpc/grpc-js installed beside the package, over createGrpcJsTransport.
      const stubs = firstTsBlock(readme.slice(readme.indexOf("## Calling the generated stubs")));
      const linkImport = 'import { createWorqLinkTransport } from "@worq/client";';
      expect(stubs).toContain(linkImport);
      const runStubs = async (source: string, completedAfter: number) => {
        writeFileSync(join(app, "stubs.mjs"), stripTypes(source).replaceAll('"127.0.0.1:7419"', JSON.stringify(address)));
        const stubUser = spawn(process.execPath, ["stubs.mjs"], { cwd: app, stdio: ["ignore", "pipe", "pipe"] });
        let stubOutput = "";
        stubUser.stdout.on("data", (chunk: Buffer) => (stubOutput += chunk.toString()));
        stubUser.stderr.on("data", (chunk: Buffer) => (stubOutput += chunk.toString()));
        try {
          let completed: unknown[] = [];
          for (
            const deadline = Date.now() + 20_000;
            completed.length < completedAfter && Date.now() < deadline && stubUser.exitCode === null;
          ) {
            await new Promise((resolve) => setTimeout(resolve, 200));
            const { stdout } = await run(process.execPath, [
              WORQ_CLI,
              "jobs",
              "--queue",
              "mail",
              "--state",
              "completed",
              "--server",
              address,
              "--json",
            ]);
            completed = (JSON.parse(stdout) as { jobs: unknown[] }).jobs;
          }
          expect(completed, stubOutput).toHaveLength(completedAfter);
        } finally {
          stubUser.kill("SIGKILL");
        }
      };
      await runStubs(stubs, 2); // the quickstart's job and this one
      await run(NPM, ["install", "--prefer-offline", "--no-audit", "--no-fund", "@grpc/grpc-js@^1.14.7"], { cwd: app, timeout: 45_000 });
      await runStubs(
        stubs.replace(linkImport, 'import { createGrpcJsTransport as createWorqLinkTransport } from "@worq/client/grpc-js";'),
        3,
      );
    },
    90_000,
  );
});
