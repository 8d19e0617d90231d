import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { WorkqSocket } from "./support.js";
import { EXAMPLES } from "./workq-examples.js";

/** `created` and `started` show the server's clock: written `<now>` in the examples. */
const NOW = /^(created|started) \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\r$/gm;

describe("Workq's protocol examples over a real socket, reply by reply, byte for byte", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ workqPort: 0 });
  });
  afterAll(async () => {
    await server.close();
  });

  for (const example of EXAMPLES) {
    it(example.name, async () => {
      const conns = { a: await WorkqSocket.open(server.workqPort!), b: await WorkqSocket.open(server.workqPort!) };
      try {
        for (const [i, step] of example.steps.entries()) {
          if (step.send !== undefined) conns[step.conn].write(step.send);
          if (step.reply === undefined) continue;
          const expected = step.reply.replace(/<now>/g, "2000-01-01T00:00:00Z");
          const actual = (await conns[step.conn].read(Buffer.byteLength(expected, "latin1"))).replace(
            NOW,
            (_, key: string) => `${key} 2000-01-01T00:00:00Z\r`,
          );
          expect(actual, `step ${i}: ${step.send ?? "(reply)"}`).toBe(expected);
        }
        expect(await conns.a.drain(30), "nothing more on a").toMatch(/^(\+OK 1\r\n[\s\S]*)?$/);
        expect(await conns.b.drain(0), "nothing more on b").toBe("");
      } finally {
        conns.a.close();
        conns.b.close();
        // Each example starts with empty queues.
        await purge(server);
      }
    });
  }
});

/** Deletes every job, so each example starts with empty queues. */
async function purge(server: TestServer): Promise<void> {
  for (;;) {
    const { jobs } = await server.admin.listJobs({ pageSize: 100 });
    if (jobs.length === 0) return;
    for (const job of jobs) await server.admin.deleteJob({ jid: job.jid });
  }
}
