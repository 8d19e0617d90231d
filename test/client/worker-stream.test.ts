import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState, Worker, WorqClient, type WorkerEvent } from "@worq/client";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";

describe("the TS worker's Lease stream (real server)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("an onEvent callback that throws is logged and ignored: the job still runs and reports", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const events: WorkerEvent["event"][] = [];
    let thrown = false;
    const logged: string[] = [];
    const worker = new Worker({
      client,
      queues: ["stream-resilience"],
      logger: { info: () => {}, warn: () => {}, error: (message) => logged.push(message) },
      onEvent: (event) => {
        events.push(event.event);
        if (event.event === "start" && !thrown) {
          thrown = true;
          throw new Error("a buggy event listener");
        }
      },
    });
    worker.register("resilient", (job) => ({ got: job.args }));
    const running = worker.run();
    const jid = await client.submit("resilient", { queue: "stream-resilience", args: [1, "two"] });
    const job = await client.waitResult(jid, 10_000);
    await worker.stop();
    await running;
    expect(job.state).toBe(JobState.COMPLETED);
    expect(JSON.parse(Buffer.from(job.result).toString())).toEqual({ got: [1, "two"] });
    expect(thrown).toBe(true);
    expect(logged).toContain("onEvent threw; ignored");
    expect(events).toEqual(expect.arrayContaining(["ready", "start", "done", "stopped"]));
  });

  it("setConcurrency changes how many handlers run at once without reconnecting; none running is interrupted", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const worker = new Worker({ client, queues: ["stream-concurrency"], concurrency: 1 });
    let running = 0;
    let finished = 0;
    const releases: (() => void)[] = [];
    worker.register("hold", () => {
      running++;
      return new Promise<void>((resolve) => releases.push(() => (running--, finished++, resolve())));
    });
    const run = worker.run();
    await client.submitBatch(Array.from({ length: 6 }, () => ({ type: "hold", queue: "stream-concurrency" })));
    const until = async (check: () => boolean) => {
      for (let i = 0; i < 250 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(check()).toBe(true);
    };
    await until(() => running === 1);
    await worker.setConcurrency(3);
    await until(() => running === 3);
    const credits = async () =>
      (await server.admin.listWorkers({})).workers.filter((w) => w.workerId === worker.workerId).map((w) => w.credits);
    expect(await credits()).toEqual([3]);
    // Lowered: the three keep running; the next starts only once none of them is left over it.
    await worker.setConcurrency(1);
    releases.shift()!();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(running).toBe(2);
    releases.shift()!();
    releases.shift()!();
    await until(() => running === 1 && releases.length === 1);
    await expect(worker.setConcurrency(0)).rejects.toThrow(/concurrency: must be an integer from 1 to 10000/);
    expect(await credits()).toEqual([1]);
    for (let i = 0; i < 500 && finished < 6; i++) {
      releases.shift()?.();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(finished).toBe(6);
    await worker.stop();
    await run;
  });

  it("a concurrency set while the stream opens, before its id is known, reaches that stream", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const worker = new Worker({ client, queues: ["stream-opening"], concurrency: 1 });
    let running = 0;
    const releases: (() => void)[] = [];
    worker.register("hold", () => {
      running++;
      return new Promise<void>((resolve) => releases.push(resolve));
    });
    // Raised right after the Lease call is sent (it asked for 1), before the first keepalive
    // names the stream: there is no stream to call yet.
    const link = client.link;
    const open = link.serverStream.bind(link);
    let raised: Promise<void> | undefined;
    link.serverStream = (path, request) => {
      const call = open(path, request);
      raised ??= worker.setConcurrency(3);
      return call;
    };
    const run = worker.run();
    await client.submitBatch(Array.from({ length: 4 }, () => ({ type: "hold", queue: "stream-opening" })));
    for (let i = 0; i < 250 && running < 3; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(raised).toBeDefined();
    expect(running).toBe(3);
    const workers = (await server.admin.listWorkers({})).workers.filter((w) => w.workerId === worker.workerId);
    expect(workers.map((w) => w.credits)).toEqual([3]);
    for (let i = 0; i < 250 && !(running === 4 && releases.length === 0); i++) {
      releases.shift()?.();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(running).toBe(4);
    await worker.stop();
    await run;
  });

  it("hands the handler the job's fields, and the whole Job message as job.proto", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const seen: unknown[] = [];
    const worker = new Worker({ client, queues: ["stream-fields"] });
    worker.register("fields", (job) => {
      seen.push({
        jid: job.jid,
        queue: job.queue,
        args: job.args,
        kwargs: job.kwargs,
        tags: job.tags,
        attempt: job.attempt,
        protoJid: job.proto.jid,
        protoQueue: job.proto.queue,
      });
    });
    const running = worker.run();
    const jid = await client.submit("fields", {
      queue: "stream-fields",
      args: [{ a: [true, null] }],
      kwargs: { k: 1.5 },
      tags: { team: "x" },
    });
    await client.waitResult(jid, 10_000);
    await worker.stop();
    await running;
    expect(seen).toEqual([
      {
        jid,
        queue: "stream-fields",
        args: [{ a: [true, null] }],
        kwargs: { k: 1.5 },
        tags: { team: "x" },
        attempt: 1,
        protoJid: jid,
        protoQueue: "stream-fields",
      },
    ]);
  });

  it("takes a handler's outcome however it comes: a value, a thenable, a throw, or a result JSON cannot hold", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const worker = new Worker({ client, queues: ["stream-outcomes"] });
    worker.register("value", () => ({ v: 1 }));
    worker.register("thenable", () => ({ then: (resolve: (value: unknown) => void) => setTimeout(() => resolve({ v: 2 }), 1) }));
    worker.register("throws", () => {
      throw new Error("sync boom");
    });
    worker.register("bigint", () => ({ n: 1n }));
    const running = worker.run();
    const submit = (type: string) => client.submit(type, { queue: "stream-outcomes", retry: { maxAttempts: 1 } });
    const [value, thenable, throws, bigint] = await Promise.all(["value", "thenable", "throws", "bigint"].map(submit));
    const result = async (jid: string) => client.waitResult(jid, 10_000);
    const json = (bytes: Uint8Array) => JSON.parse(Buffer.from(bytes).toString());
    expect(json((await result(value!)).result)).toEqual({ v: 1 });
    expect(json((await result(thenable!)).result)).toEqual({ v: 2 });
    const thrown = await result(throws!);
    expect(thrown.state).toBe(JobState.DEAD_LETTER);
    expect(thrown.failure?.message).toBe("sync boom");
    const unserializable = await result(bigint!);
    expect(unserializable.state).toBe(JobState.DEAD_LETTER);
    expect(unserializable.failure?.message).toMatch(/BigInt/);
    await worker.stop();
    await running;
  });

  it("queueOrder random takes each job from a queue chosen at random among those with ready jobs; listed drains them in order", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const firstQueues = async (prefix: string, queueOrder?: "listed" | "random") => {
      const queues = [`${prefix}-a`, `${prefix}-b`];
      await client.submitBatch(queues.flatMap((queue) => Array.from({ length: 30 }, () => ({ type: "pick", queue }))));
      const seen: string[] = [];
      const worker = new Worker({ client, queues, concurrency: 1, ...(queueOrder && { queueOrder }) });
      worker.register("pick", (job) => {
        seen.push(job.queue);
      });
      const running = worker.run();
      while (seen.length < 20) await new Promise((resolve) => setTimeout(resolve, 20));
      await worker.stop();
      await running;
      return seen.slice(0, 20);
    };
    expect(await firstQueues("ts-order-listed")).toEqual(Array<string>(20).fill("ts-order-listed-a"));
    // Twenty fair coins all landing on one queue: about one run in 500,000.
    expect(new Set(await firstQueues("ts-order-random", "random"))).toEqual(new Set(["ts-order-random-a", "ts-order-random-b"]));
    expect(() => new Worker({ client, queues: ["q"], queueOrder: "sideways" as "random" })).toThrow(/queueOrder/);
  });

  it("FAN_OUT from a handler: it spawns children, collects their results with client.collectChildren, and a children_of join runs last", async () => {
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const order: string[] = [];
    const worker = new Worker({ client, queues: ["ts-fan"], concurrency: 4 });
    worker.register("parent", async (job) => {
      await client.submit("gather", { queue: "ts-fan", dependsOn: { childrenOf: job.jid } });
      for (const n of [1, 2, 3]) await client.submit("square", { queue: "ts-fan", args: [n], parentJid: job.jid });
      const { children, finished } = await client.collectChildren(job.jid, 10_000);
      order.push("parent");
      return { finished, sum: children.reduce((sum, child) => sum + (JSON.parse(Buffer.from(child.result).toString()) as number), 0) };
    });
    worker.register("square", (job) => {
      order.push("child");
      return (job.args[0] as number) ** 2;
    });
    worker.register("gather", () => {
      order.push("gather");
    });
    const running = worker.run();
    const parent = await client.waitResult(await client.submit("parent", { queue: "ts-fan" }), 10_000);
    expect(JSON.parse(Buffer.from(parent.result).toString())).toEqual({ finished: true, sum: 14 });
    while (order.length < 5) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(order).toEqual(["child", "child", "child", "parent", "gather"]);
    await worker.stop();
    await running;
  });
});
