/**
 * MUTATE on a real server process: every command (clear, kill, discard, requeue) on every
 * target (scheduled, retries, dead) with every kind of filter (none, `{}`, jids, a Redis glob
 * in `regexp`, jobtype), checked through the admin API, again after a kill -9 and restart,
 * then through FETCH and INFO; and its refusals, in Faktory's words.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { globRegExp } from "../../src/faktory/admin-commands.js";
import { FaktorySocket, inMs, job, killHard, spawnFaktoryServer, statesOf, type FaktoryServer } from "./admin-support.js";

const TARGETS = { scheduled: "DELAYED", retries: "RETRYING", dead: "DEAD_LETTER" } as const;
const COMMANDS = ["clear", "kill", "discard", "requeue"] as const;
const FILTERS = ["absent", "empty", "jids", "regexp", "jobtype"] as const;
type Target = keyof typeof TARGETS;
type Command = (typeof COMMANDS)[number];
type FilterKind = (typeof FILTERS)[number];

interface Case {
  queue: string;
  target: Target;
  cmd: Command;
  filter: FilterKind;
  /** Each job's state afterwards (absent: deleted). */
  expected: Record<string, string>;
}

function filterOf(kind: FilterKind, queue: string): Record<string, unknown> {
  switch (kind) {
    case "absent":
      return {};
    case "empty":
      return { filter: {} };
    case "jids":
      return { filter: { jids: [`${queue}-x`, "no-such-jid-at-all"] } };
    case "regexp":
      // A Redis glob over the job's JSON: a character class, and `?` for one character.
      return { filter: { regexp: `*"args":?"uid:[1]-${queue}"]*` } };
    case "jobtype":
      return { filter: { jobtype: `MatchMe-${queue}` } };
  }
}

/** Whether MUTATE with this filter reaches every job of the target set, whatever its queue. */
function isWholeSet(cmd: Command, filter: FilterKind): boolean {
  return cmd === "clear" || filter === "absent" || filter === "empty";
}

/** Two jobs of `queue` put in the target's set: x (jobtype MatchMe-<queue>, args ["uid:1-<queue>"]) and y (Other-…, uid:2-…). */
async function setUp(conn: FaktorySocket, queue: string, target: Target): Promise<void> {
  const extra = target === "scheduled" ? { at: inMs(3_600_000) } : target === "retries" ? { retry: 5 } : { retry: -1 };
  await conn.ok(`PUSH ${job(`${queue}-x`, queue, { jobtype: `MatchMe-${queue}`, args: [`uid:1-${queue}`], ...extra })}`);
  await conn.ok(`PUSH ${job(`${queue}-y`, queue, { jobtype: `Other-${queue}`, args: [`uid:2-${queue}`], ...extra })}`);
  if (target === "scheduled") return;
  for (const name of ["x", "y"]) {
    expect((await conn.fetch(queue))!.jid).toBe(`${queue}-${name}`);
    await conn.ok(`FAIL {"jid":"${queue}-${name}","errtype":"E","message":"m"}`);
  }
}

function expectedAfter(queue: string, target: Target, cmd: Command, filter: FilterKind): Record<string, string> {
  const expected: Record<string, string> = {};
  for (const name of ["x", "y"]) {
    const matched = name === "x" || isWholeSet(cmd, filter);
    const jid = `${queue}-${name}`;
    if (!matched) expected[jid] = TARGETS[target];
    else if (cmd === "kill") expected[jid] = "DEAD_LETTER";
    else if (cmd === "requeue") expected[jid] = "SCHEDULED";
  }
  return expected;
}

describe("MUTATE", () => {
  let dir: string;
  let server: FaktoryServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "worq-faktory-mutate-"));
    server = await spawnFaktoryServer(join(dir, "data"));
  });
  afterAll(async () => {
    server?.child.kill("SIGKILL");
    await server?.exited;
    rmSync(dir, { recursive: true, force: true });
  });

  /** Runs one case: its two jobs set up, MUTATE sent, each job's state checked through the admin API. */
  async function runCase(conn: FaktorySocket, target: Target, cmd: Command, filter: FilterKind): Promise<Case> {
    const queue = `m-${target}-${cmd}-${filter}`;
    await setUp(conn, queue, target);
    expect(await statesOf(server.httpPort, queue)).toEqual({ [`${queue}-x`]: TARGETS[target], [`${queue}-y`]: TARGETS[target] });
    await conn.ok(`MUTATE ${JSON.stringify({ cmd, target, ...filterOf(filter, queue) })}`);
    const expected = expectedAfter(queue, target, cmd, filter);
    expect({ queue, states: await statesOf(server.httpPort, queue) }).toEqual({ queue, states: expected });
    return { queue, target, cmd, filter, expected };
  }

  it("clear, and any command without a filter (absent or {}), reaches every job of the set", async () => {
    const conn = await FaktorySocket.open(server.faktoryPort);
    for (const target of Object.keys(TARGETS) as Target[])
      for (const cmd of COMMANDS)
        for (const filter of FILTERS) {
          if (!isWholeSet(cmd, filter)) continue;
          // Jobs of another queue in the same set are reached too.
          const other = `m-other-${target}`;
          await setUp(conn, other, target);
          await runCase(conn, target, cmd, filter);
          const otherAfter = expectedAfter(other, target, cmd, "absent");
          expect({ other, states: await statesOf(server.httpPort, other) }).toEqual({ other, states: otherAfter });
          await conn.ok("FLUSH");
        }
    conn.close();
    // Some 150 durable commands in a row: 5 s alone, several times that on a loaded machine,
    // and a timed-out loop would go on clearing the next test's jobs.
  }, 60_000);

  it("each command on each target with each filter (jids, a glob, a jobtype) moves exactly the matching jobs, durably (kill -9 and restart)", async () => {
    const conn = await FaktorySocket.open(server.faktoryPort);
    const cases: Case[] = [];
    for (const target of Object.keys(TARGETS) as Target[])
      for (const cmd of COMMANDS)
        for (const filter of FILTERS) if (!isWholeSet(cmd, filter)) cases.push(await runCase(conn, target, cmd, filter));
    conn.close();

    // Every move was durable when answered.
    await killHard(server);
    server = await spawnFaktoryServer(join(dir, "data"));
    for (const { queue, expected } of cases) {
      expect({ queue, states: await statesOf(server.httpPort, queue) }).toEqual({ queue, states: expected });
    }
    const after = await FaktorySocket.open(server.faktoryPort);
    const all = cases.flatMap((c) => Object.values(c.expected));
    const count = (state: string) => all.filter((s) => s === state).length;
    const info = await after.json<{ faktory: { sets: Record<string, number>; total_enqueued: number } }>("INFO");
    expect(info.faktory.sets).toEqual({ scheduled: count("DELAYED"), retries: count("RETRYING"), dead: count("DEAD_LETTER"), working: 0 });
    expect(info.faktory.total_enqueued).toBe(count("SCHEDULED"));
    // Requeued jobs are fetched at once; a requeued retry or dead job keeps its failure.
    for (const { queue, target, expected } of cases) {
      for (const [jid, state] of Object.entries(expected)) {
        if (state !== "SCHEDULED") continue;
        const fetched = await after.fetch(queue);
        expect(fetched?.jid).toBe(jid);
        if (target !== "scheduled") expect(fetched?.failure).toMatchObject({ errtype: "E", message: "m" });
        await after.ok(`ACK {"jid":"${jid}"}`);
      }
    }
    // clear empties each set, durably.
    for (const target of Object.keys(TARGETS)) await after.ok(`MUTATE {"cmd":"clear","target":"${target}"}`);
    after.close();
    await killHard(server);
    server = await spawnFaktoryServer(join(dir, "data"));
    const cleared = await FaktorySocket.open(server.faktoryPort);
    const emptied = await cleared.json<{ faktory: { sets: Record<string, number> } }>("INFO");
    expect(emptied.faktory.sets).toEqual({ scheduled: 0, retries: 0, dead: 0, working: 0 });
    // Only the requeued jobs, fetched and acked above, are left.
    for (const { queue } of cases) {
      expect(Object.values(await statesOf(server.httpPort, queue)).filter((state) => state !== "COMPLETED")).toEqual([]);
    }
    cleared.close();
  });

  it("reads spaced JSON (Python's clients) and a filter naming both a glob and a jobtype", async () => {
    const conn = await FaktorySocket.open(server.faktoryPort);
    const later = inMs(3_600_000);
    await conn.ok(`PUSH ${job("m-both-x", "m-both", { jobtype: "MatchMe", args: ["uid:1"], at: later })}`);
    await conn.ok(`PUSH ${job("m-both-y", "m-both", { jobtype: "Other", args: ["uid:2"], at: later })}`);
    await conn.ok(`PUSH ${job("m-both-z", "m-both", { jobtype: "MatchMe", args: ["uid:2"], at: later })}`);
    // The glob matches y and z (uid:2); the jobtype only x and z: z alone goes.
    await conn.ok('MUTATE {"cmd": "discard", "target": "scheduled", "filter": {"regexp": "*uid:2*", "jobtype": "MatchMe"}}');
    expect(await statesOf(server.httpPort, "m-both")).toEqual({ "m-both-x": "DELAYED", "m-both-y": "DELAYED" });
    // An empty jids list is no filter by jid.
    await conn.ok('MUTATE {"cmd":"kill","target":"scheduled","filter":{"jids":[],"jobtype":"Other"}}');
    expect(await statesOf(server.httpPort, "m-both")).toEqual({ "m-both-x": "DELAYED", "m-both-y": "DEAD_LETTER" });
    conn.close();
  });

  it("refuses a bad target, command or JSON in Faktory's words, and changes nothing", async () => {
    const conn = await FaktorySocket.open(server.faktoryPort);
    await setUp(conn, "m-refuse", "scheduled");
    const before = await statesOf(server.httpPort, "m-refuse");
    const refusals: [string, string][] = [
      ['{"cmd":"clear","target":"working"}', "invalid target for mutation command"],
      ['{"cmd":"clear"}', "invalid target for mutation command"],
      ['{"cmd":"zap","target":"working"}', "invalid target for mutation command"],
      ['{"cmd":"zap","target":"scheduled"}', "unknown mutate operation"],
      ['{"target":"scheduled"}', "unknown mutate operation"],
      ['{"cmd":"clear","target":7}', "invalid MUTATE: target must be a string"],
      ['{"cmd":"discard","target":"scheduled","filter":[]}', "invalid MUTATE: filter must be an object"],
      ['{"cmd":"discard","target":"scheduled","filter":{"jids":"m-refuse-x"}}', "invalid MUTATE: filter.jids must be an array of strings"],
      ['{"cmd":"discard","target":"scheduled","filter":{"regexp":1}}', "invalid MUTATE: filter.regexp must be a string"],
      ['{"cmd":"discard","target":"scheduled","filter":{"jobtype":true}}', "invalid MUTATE: filter.jobtype must be a string"],
      ["[1]", "invalid MUTATE: expected a JSON object"],
    ];
    for (const [argument, text] of refusals) expect(await conn.call(`MUTATE ${argument}`)).toEqual({ kind: "error", text });
    const broken = await conn.call('MUTATE {"cmd":"clear",');
    expect(broken.kind).toBe("error");
    expect((broken as { text: string }).text).toMatch(/JSON/);
    expect(await conn.call("MUTATE")).toMatchObject({ kind: "error" });
    expect(await statesOf(server.httpPort, "m-refuse")).toEqual(before);
    expect(Object.values(before)).toEqual(["DELAYED", "DELAYED"]);
    conn.close();
  });
});

describe("MUTATE's regexp: a Redis glob over the whole text", () => {
  const cases: [string, string, boolean][] = [
    ["*uid:1*", '{"args":["uid:1"]}', true],
    ["*uid:1*", '{"args":["uid:2"]}', false],
    ["uid:1", "xuid:1", false],
    ["a?c", "abc", true],
    ["a?c", "ac", false],
    ["a[bc]d", "acd", true],
    ["a[^bc]d", "acd", false],
    ["a[^bc]d", "aed", true],
    ["a[a-c]d", "abd", true],
    ["a[c-a]d", "abd", true],
    ["a[a-c]d", "aed", false],
    ["a\\*b", "a*b", true],
    ["a\\*b", "axb", false],
    ["a[\\]]b", "a]b", true],
    ["a.b", "axb", false],
    ["(x)+", "(x)+", true],
    ["a[]b", "ab", false],
    ["*", "", true],
    ["a*b*c", "a\nb\nc", true],
  ];
  it.each(cases)("%s against %s: %s", (glob, text, matched) => {
    expect(globRegExp(glob).test(text)).toBe(matched);
  });
});
