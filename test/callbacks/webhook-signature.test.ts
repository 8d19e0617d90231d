import { execFile } from "node:child_process";
import { createHmac } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyWebhookSignature } from "@worq/client";
import { readWebhookSecret, webhookSignature } from "../../src/callbacks/webhook-signature.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { commandWorks, fileExists, toolAvailable } from "../support/require-tool.js";

const ROOT = join(import.meta.dirname, "../..");
const PYTHON = join(ROOT, ".tools/venv/bin/python");
const SECRET = "whsec-7f3a9c1e5b2d4f60a8e1c3b5d7f9a2c4";
const HINT = "run `bash scripts/install-test-tools.sh` first";
const pythonAvailable = toolAvailable(
  "Python webhook snippet",
  () => fileExists(PYTHON) && commandWorks(PYTHON, ["--version"]),
  `no .tools/venv; ${HINT}`,
);
const goAvailable = toolAvailable("Go webhook snippet", () => commandWorks("go", ["version"]), "no go on PATH; install Go 1.26 or newer");

/** The snippet files docs/webhooks.md shows, each verbatim. */
const SNIPPETS = ["packages/client/src/webhook-signature.ts", "examples/python/verify_webhook.py", "examples/go/verifywebhook/main.go"];

interface Delivery {
  headers: IncomingHttpHeaders;
  rawBody: Buffer;
}

/** Runs a snippet program with the header as its argument and the body on stdin; resolves with its exit code and stdout. */
function runSnippet(command: string, args: string[], cwd: string, body: Buffer): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      args,
      { cwd, env: { ...process.env, WORQ_WEBHOOK_SECRET: SECRET }, timeout: 120_000 },
      (error, stdout) => {
        if (error && typeof error.code !== "number") reject(error);
        else resolve({ code: error ? (error.code as number) : 0, stdout: stdout.trim() });
      },
    );
    child.stdin!.end(body);
  });
}

describe("webhook signatures: a real server signs, and each documented snippet verifies a real delivery", () => {
  let server: TestServer;
  let receiver: Server;
  let dir: string;
  let signed: Delivery;

  beforeAll(async () => {
    const deliveries: Delivery[] = [];
    receiver = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        deliveries.push({ headers: request.headers, rawBody: Buffer.concat(chunks) });
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    const origin = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
    dir = mkdtempSync(join(tmpdir(), "worq-webhook-secret-"));
    writeFileSync(join(dir, "secret"), `${SECRET}\n`, { mode: 0o600 });
    server = await startTestServer({ callbackAllow: [origin], webhookSecretFile: join(dir, "secret") });
    const { jid } = await server.producer.submit({
      job: { type: "t", queue: "signed", kwargs: { note: "héllo ✓" }, callbackUrl: `${origin}/hook` },
    });
    await server.producer.cancel({ jid });
    const deadline = Date.now() + 10_000;
    while (deliveries.length === 0) {
      if (Date.now() > deadline) throw new Error("no webhook arrived");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    signed = deliveries[0]!;
    expect((JSON.parse(signed.rawBody.toString()) as { job_id: string }).job_id).toBe(jid);
  });
  afterAll(async () => {
    await server?.close();
    await new Promise((resolve) => receiver.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  it('the Worq-Signature header is "t=<now>,v1=<hex HMAC-SHA256(secret, t.body)>", keyed by the file without its newline', () => {
    const header = signed.headers["worq-signature"] as string;
    const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
    expect(match, header).not.toBeNull();
    const t = Number(match![1]);
    expect(Math.abs(Date.now() / 1000 - t)).toBeLessThan(30);
    const expected = createHmac("sha256", SECRET).update(`${t}.`).update(signed.rawBody).digest("hex");
    expect(match![2]).toBe(expected);
    expect(webhookSignature(Buffer.from(SECRET), signed.rawBody.toString(), t)).toBe(header);
  });

  it("TypeScript (verifyWebhookSignature of the @worq/client package): accepts the delivery; refuses a changed body, another secret, a stale or missing header", () => {
    const header = signed.headers["worq-signature"] as string;
    const t = Number(/^t=(\d+)/.exec(header)![1]);
    expect(verifyWebhookSignature(SECRET, header, signed.rawBody)).toBe(true);
    expect(verifyWebhookSignature(SECRET, header, Buffer.concat([signed.rawBody, Buffer.from(" ")]))).toBe(false);
    expect(verifyWebhookSignature(`${SECRET}x`, header, signed.rawBody)).toBe(false);
    expect(verifyWebhookSignature(SECRET, header, signed.rawBody, t + 301)).toBe(false);
    expect(verifyWebhookSignature(SECRET, header, signed.rawBody, t + 299)).toBe(true);
    expect(verifyWebhookSignature(SECRET, undefined, signed.rawBody)).toBe(false);
    const flipped = header.replace(/v1=(.)/, (_, first: string) => `v1=${first === "0" ? "1" : "0"}`);
    expect(verifyWebhookSignature(SECRET, flipped, signed.rawBody)).toBe(false);
  });

  it.skipIf(!pythonAvailable)("Python snippet (examples/python/verify_webhook.py): verified, and rejected for a changed body", async () => {
    const args = [join(ROOT, "examples/python/verify_webhook.py"), signed.headers["worq-signature"] as string];
    expect(await runSnippet(PYTHON, args, ROOT, signed.rawBody)).toEqual({ code: 0, stdout: "verified" });
    expect(await runSnippet(PYTHON, args, ROOT, Buffer.concat([signed.rawBody, Buffer.from("x")]))).toEqual({
      code: 1,
      stdout: "rejected",
    });
  });

  it.skipIf(!goAvailable)(
    "Go snippet (examples/go/verifywebhook, go run): verified, and rejected for a changed body",
    async () => {
      const args = ["run", "./verifywebhook", signed.headers["worq-signature"] as string];
      const cwd = join(ROOT, "examples/go");
      expect(await runSnippet("go", args, cwd, signed.rawBody)).toEqual({ code: 0, stdout: "verified" });
      expect(await runSnippet("go", args, cwd, Buffer.concat([signed.rawBody, Buffer.from("x")]))).toEqual({ code: 1, stdout: "rejected" });
    },
    240_000,
  );

  it("docs/webhooks.md shows each snippet file verbatim", () => {
    const doc = readFileSync(join(ROOT, "docs/webhooks.md"), "utf8");
    for (const file of SNIPPETS) expect(doc.includes(readFileSync(join(ROOT, file), "utf8")), file).toBe(true);
  });

  it("--webhook-secret-file: a secret under 16 bytes or a missing file is refused with the flag's name", () => {
    writeFileSync(join(dir, "short"), "abc\n");
    expect(() => readWebhookSecret(join(dir, "short"))).toThrow(
      `--webhook-secret-file: ${join(dir, "short")} holds 3 bytes; a secret needs at least 16 (e.g. openssl rand -hex 32 > ${join(dir, "short")})`,
    );
    expect(() => readWebhookSecret(join(dir, "missing"))).toThrow(/^--webhook-secret-file: cannot read .*missing: ENOENT/);
  });
});
