import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { rawHttp } from "../fuzz/support/raw-http.js";
import { http2Session, rawConnection } from "../support/connections.js";
import { sleep, spawnNode, waitForCluster, type ClusterProcess } from "./support/cluster.js";

/**
 * A follower serves the same two ports a leader does and caps them the same way: at most
 * --max-connections open connections on each, and a connection that sends nothing is closed
 * after --header-timeout. The leader runs with the defaults (its followers' links are four
 * connections each); only the follower gets the tight caps.
 */
describe.skipIf(!postgresAvailable())("--max-connections and --header-timeout on a follower's ports", () => {
  let postgres: PostgresCluster;
  const nodes: ClusterProcess[] = [];
  let follower: ClusterProcess;
  const opened: { destroy(): void }[] = [];
  beforeAll(async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    const leader = await spawnNode(url, "caps-leader");
    nodes.push(leader);
    expect(await waitForCluster(leader.clients, 1)).toBe("caps-leader");
    follower = await spawnNode(url, "caps-follower", ["--max-connections", "2", "--header-timeout", "500ms"]);
    nodes.push(follower);
    expect(await waitForCluster(leader.clients, 2)).toBe("caps-leader");
  }, 120_000);
  afterAll(async () => {
    opened.forEach((connection) => connection.destroy());
    nodes.forEach((node) => node.child.kill("SIGKILL"));
    await postgres?.stop();
  });

  it("gRPC port: a third connection is closed at once while two are open; the two are served", async () => {
    const kept = [await http2Session(follower.port), await http2Session(follower.port)];
    opened.push(...kept);
    const third = await rawConnection(follower.port);
    expect(await third.closedWithin(2_000)).toBeLessThan(2_000);
    await sleep(700); // past --header-timeout: the two that sent their preface stay
    expect(kept.map((session) => session.closed)).toEqual([false, false]);
    kept.forEach((session) => session.destroy());
  });

  it("HTTP port: a third connection is closed at once, unanswered, while two are open", async () => {
    const request = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    const kept = [await rawConnection(follower.httpPort, request), await rawConnection(follower.httpPort, request)];
    opened.push(...kept.map(({ socket }) => socket));
    const third = await rawConnection(follower.httpPort, request);
    let answered = "";
    third.socket.on("data", (chunk: Buffer) => (answered += chunk.toString()));
    expect(await third.closedWithin(2_000)).toBeLessThan(2_000);
    expect(answered).toBe("");
    kept.forEach(({ socket }) => socket.destroy());
    await sleep(100);
    expect((await rawHttp(follower.httpPort, request)).status).toBe(200);
  });

  it("a connection that sends nothing to either port is closed after --header-timeout", async () => {
    for (const port of [follower.port, follower.httpPort]) {
      const silent = await rawConnection(port);
      opened.push(silent.socket);
      const heldMs = await silent.closedWithin(5_000);
      expect(heldMs).toBeGreaterThanOrEqual(450);
    }
  });
});
