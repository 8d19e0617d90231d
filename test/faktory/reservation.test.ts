import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { FaktorySocket, jsonOf, newJid, OK } from "./support.js";

describe("Faktory reservations and durability (real process)", () => {
  const dir = mkdtempSync(join(tmpdir(), "worq-faktory-crash-"));
  let server: ServerProcess | undefined;
  afterAll(async () => {
    server?.child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it("every job whose PUSH or PUSHB was answered is there after kill -9, fetched by its jid", async () => {
    server = await spawnServer(dir, ["--faktory-port", "0"]);
    const conn = await FaktorySocket.hello(server.faktoryPort!, { wid: "crash" });
    const jids = Array.from({ length: 200 }, () => newJid());
    // Pipelined: every PUSH in one write, then one PUSHB.
    conn.write(
      jids
        .slice(0, 150)
        .map((jid) => `PUSH {"jid":"${jid}","jobtype":"E","args":[],"queue":"crash"}\r\n`)
        .join(""),
    );
    for (let i = 0; i < 150; i++) expect(await conn.reply()).toEqual(OK);
    const batch = jids.slice(150).map((jid) => ({ jid, jobtype: "E", args: [], queue: "crash" }));
    expect(jsonOf(await conn.command(`PUSHB ${JSON.stringify(batch)}`))).toEqual({});
    server.child.kill("SIGKILL");
    await server.exited;
    conn.close();

    server = await spawnServer(dir, ["--faktory-port", "0"]);
    const after = await FaktorySocket.hello(server.faktoryPort!, { wid: "crash-2" });
    const fetched = new Set<string>();
    for (let i = 0; i < jids.length; i++) fetched.add(String(jsonOf(await after.command("FETCH crash")).jid));
    expect([...fetched].sort()).toEqual([...jids].sort());
    after.close();
  });

  it("a reservation that lapses (reserve_for, at least 60 s) is a failed attempt: the job comes back with its failure", async () => {
    server ??= await spawnServer(dir, ["--faktory-port", "0"]);
    const conn = await FaktorySocket.hello(server.faktoryPort!, { wid: "lapse" });
    const jid = newJid();
    expect(await conn.command(`PUSH {"jid":"${jid}","jobtype":"Slow","args":[],"queue":"lapse","reserve_for":1}`)).toEqual(OK);
    const first = jsonOf(await conn.command("FETCH lapse"));
    expect(first).toMatchObject({ jid, reserve_for: 60 });
    const fetchedAt = Date.now();
    // Nobody reports it. FETCH again until it is handed out again.
    let again: Record<string, unknown> | undefined;
    while (!again && Date.now() - fetchedAt < 110_000) {
      const reply = await conn.command("FETCH lapse");
      if (reply.kind === "bulk") again = jsonOf(reply);
    }
    const elapsed = Date.now() - fetchedAt;
    expect(again?.jid).toBe(jid);
    // 60 s of reservation, then the retry's 15 s (±10 %).
    expect(elapsed).toBeGreaterThanOrEqual(60_000 + 13_000);
    expect(again?.failure).toMatchObject({ retry_count: 0, remaining: 25 });
    // The ACK names the job by its jid: it completes the new reservation.
    expect(await conn.command(`ACK {"jid":"${jid}"}`)).toEqual(OK);
    conn.close();
  }, 130_000);
});
