import { timestampMs } from "@bufbuild/protobuf/wkt";
import { afterAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { MissedTicks } from "@worq/client/gen/worq/v1/schedule_pb.js";
import { postgresAvailable, startPostgres, type PostgresCluster } from "../support/postgres.js";
import { sleep, spawnNode, waitForCluster, waitForNewLeader, type ClusterProcess } from "./support/cluster.js";

/**
 * A schedule across a change of cluster leader: an `@every 1s` schedule (CATCH_UP) runs on
 * the leader; the leader is SIGKILLed; the next leader loads the tick record from PostgreSQL
 * and goes on. Every tick from the first to the last is enqueued exactly once.
 */
describe.skipIf(!postgresAvailable())("schedules across a leader change (cluster on PostgreSQL)", () => {
  let postgres: PostgresCluster | undefined;
  const nodes: ClusterProcess[] = [];
  afterAll(async () => {
    nodes.forEach((node) => node.child.kill("SIGKILL"));
    await Promise.all(nodes.map((node) => node.exited));
    await postgres?.stop();
  });

  it("no tick lost or doubled when the leader is killed", async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase();
    for (const id of ["first", "second"]) nodes.push(await spawnNode(url, id));
    expect(await waitForCluster(nodes[1]!.clients, 2)).toBe("first");
    const follower = nodes[1]!;
    await follower.clients.admin.putSchedule({
      schedule: { name: "beat", cron: "@every 1s", job: { type: "beat", queue: "ticks" }, missed: MissedTicks.CATCH_UP, catchUpMax: 1000 },
    });
    await sleep(3_300);
    nodes[0]!.child.kill("SIGKILL");
    await waitForNewLeader(follower, "first");
    await sleep(3_000);
    // Paused, it ticks no more: what is listed and the schedule's last run are read from the same state.
    await follower.clients.admin.pauseSchedule({ name: "beat" });
    const ticks: number[] = [];
    let pageToken = "";
    do {
      const page = await follower.clients.admin.listJobs({ queue: "ticks", state: JobState.SCHEDULED, pageSize: 1000, pageToken });
      for (const job of page.jobs) {
        expect(job.schedule).toBe("beat");
        ticks.push(timestampMs(job.scheduledTick!));
      }
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    ticks.sort((a, b) => a - b);
    expect(new Set(ticks).size, "a tick enqueued twice").toBe(ticks.length);
    const expected: number[] = [];
    for (let t = ticks[0]!; t <= ticks.at(-1)!; t += 1_000) expected.push(t);
    expect(ticks, "a tick lost").toEqual(expected);
    expect(ticks.length).toBeGreaterThanOrEqual(5);
    const { schedule } = await follower.clients.admin.getSchedule({ name: "beat" });
    expect(timestampMs(schedule!.lastRunAt!)).toBe(ticks.at(-1));
  }, 120_000);
});
