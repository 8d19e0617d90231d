import { createServer, type ServerResponse, type Server } from "node:http";
import { Writable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { redactUserinfo, WebhookSender } from "../../src/callbacks/webhook-sender.js";
import { createLogger } from "../../src/log.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { createMemoryData } from "../../src/storage/memory/memory-store.js";
import { flush, openEngine } from "../engine/helpers.js";

/** A logger whose JSON lines are kept in `lines`. */
function capturingLogger(): { log: ReturnType<typeof createLogger>; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(
        ...chunk
          .toString()
          .split("\n")
          .filter((line) => line.length > 0),
      );
      done();
    },
  });
  return { log: createLogger("debug", sink), lines };
}

async function waitUntil(predicate: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("webhook sender: credentials never logged", () => {
  it("stored webhooks that can never be sent (credentials in the URL, a URL that does not parse) are dropped at once; no log line holds the password", async () => {
    const data = createMemoryData();
    const withCredentials = "6ba7b810-9dad-41d1-80b4-00c04fd430c4";
    const unparsable = "6ba7b810-9dad-41d1-80b4-00c04fd430c5";
    data.callbacks.set(withCredentials, { jid: withCredentials, url: "http://alice:s3cret@127.0.0.1:9/hook" });
    data.callbacks.set(unparsable, { jid: unparsable, url: "http://[zz/" });
    const { engine } = await openEngine({ data, isCallbackAllowed: () => true });
    const { log, lines } = capturingLogger();
    const sender = new WebhookSender(engine, log, { isAllowed: () => true });
    await waitUntil(() => data.callbacks.size === 0, "the webhooks to be settled");
    await flush();
    sender.stop();
    const logged = lines.map((line) => JSON.parse(line) as Record<string, unknown>).map(({ msg, jid, origin }) => ({ msg, jid, origin }));
    expect(logged).toEqual([
      { msg: "webhook URL carries credentials; dropped", jid: withCredentials, origin: "http://127.0.0.1:9" },
      { msg: "webhook URL does not parse; dropped", jid: unparsable, origin: undefined },
    ]);
    expect(lines.join("\n")).not.toContain("s3cret");
  });

  it("redactUserinfo masks the user:password@ of any URL in a message, fetch's own included", () => {
    let message = "";
    try {
      new Request("http://alice:s3cret@hooks.example.com/x");
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain("alice:s3cret@");
    expect(redactUserinfo(message)).toBe(message.replace("alice:s3cret@", "***@"));
    expect(redactUserinfo("to https://u@h/a and http://x:y@z:1/?q=a@b")).toBe("to https://***@h/a and http://***@z:1/?q=a@b");
    expect(redactUserinfo("no url here")).toBe("no url here");
  });
});

describe("--webhook-concurrency-per-target: a slow receiver holds only its share of the delivery slots", () => {
  let server: TestServer | undefined;
  const receivers: Server[] = [];
  afterEach(async () => {
    await server?.close();
    for (const receiver of receivers.splice(0)) {
      receiver.closeAllConnections();
      await new Promise((resolve) => receiver.close(resolve));
    }
  });

  /** A receiver on 127.0.0.1 that answers 204 at once, or holds each request until released when `hold`. */
  async function receiver(hold: boolean) {
    const held: ServerResponse[] = [];
    let inFlight = 0;
    let maxInFlight = 0;
    let delivered = 0;
    const http = createServer((request, response) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      request.resume();
      request.on("end", () => {
        const answer = () => {
          inFlight--;
          delivered++;
          response.writeHead(204).end();
        };
        if (hold) held.push(Object.assign(response, { answer }));
        else answer();
      });
    });
    receivers.push(http);
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    return {
      origin: `http://127.0.0.1:${(http.address() as { port: number }).port}`,
      stats: () => ({ inFlight, maxInFlight, delivered }),
      release: () => held.splice(0).forEach((response) => (response as ServerResponse & { answer: () => void }).answer()),
    };
  }

  it("10 webhooks stuck at a slow receiver take 2 slots; 3 to a fast receiver arrive meanwhile; the slow ones follow once it answers", async () => {
    const slow = await receiver(true);
    const fast = await receiver(false);
    server = await startTestServer({ callbackAllow: [slow.origin, fast.origin], webhookConcurrencyPerTarget: 2 });
    const finish = async (origin: string, count: number) => {
      for (let i = 0; i < count; i++) {
        const { jid } = await server!.producer.submit({ job: { type: "t", queue: "hooks", callbackUrl: `${origin}/hook` } });
        await server!.producer.cancel({ jid });
      }
    };
    await finish(slow.origin, 10);
    await waitUntil(() => slow.stats().inFlight === 2, "2 webhooks stuck at the slow receiver");
    await finish(fast.origin, 3);
    await waitUntil(() => fast.stats().delivered === 3, "the fast receiver's 3 webhooks", 5_000);
    expect(slow.stats()).toEqual({ inFlight: 2, maxInFlight: 2, delivered: 0 });
    // Each answer frees a slot for the next waiting webhook: release until all 10 are answered.
    while (slow.stats().delivered < 10) {
      slow.release();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(slow.stats()).toEqual({ inFlight: 0, maxInFlight: 2, delivered: 10 });
  }, 30_000);
});
