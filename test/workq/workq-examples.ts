/**
 * Workq's protocol examples as exchanges over one or two connections ("a", "b"): what is
 * sent and the exact reply. `created` and `started` times vary; replies write them as
 * `<now>`. Where Workq's own documentation differs from what its server and client do, the
 * exchange follows the server and client, and says so:
 * - every success reply starts with `+` (the documentation drops it in places);
 * - a lease reply's record is `<id> <name> <ttr> <size>` (Workq's Go client reads the ttr);
 * - a queue record's key count is 2 (its two keys);
 * - times that the documentation places in the past are moved to the future (a job whose
 *   time plus ttl has passed is refused).
 */
interface Step {
  conn: "a" | "b";
  /** Bytes to send; without `reply`, the reply is read by a later step. */
  send?: string;
  /** The exact reply expected (read after `send`, if any). */
  reply?: string;
}

export interface Example {
  name: string;
  steps: Step[];
}

const C4 = "6ba7b810-9dad-11d1-80b4-00c04fd430c4";
const C5 = "6ba7b810-9dad-11d1-80b4-00c04fd430c5";
const C6 = "6ba7b810-9dad-11d1-80b4-00c04fd430c6";
const C7 = "6ba7b810-9dad-11d1-80b4-00c04fd430c7";
const C8 = "6ba7b810-9dad-11d1-80b4-00c04fd430c8";
const C9 = "6ba7b810-9dad-11d1-80b4-00c04fd430c9";
const OK = "+OK\r\n";

/** A job block as inspect writes it: 12 keys, 13 with a scheduled time. */
function block(
  id: string,
  keys: { ttl?: number; payload?: string; maxAttempts?: number; maxFails?: number; priority?: number; time?: string } = {},
) {
  const payload = keys.payload ?? "ping";
  const lines = [
    "name ping",
    "ttr 1000",
    `ttl ${keys.ttl ?? 60000}`,
    `payload-size ${payload.length}`,
    `payload ${payload}`,
    `max-attempts ${keys.maxAttempts ?? 0}`,
    "attempts 0",
    `max-fails ${keys.maxFails ?? 0}`,
    "fails 0",
    `priority ${keys.priority ?? 0}`,
    "state 0",
    "created <now>",
    ...(keys.time ? [`time ${keys.time}`] : []),
  ];
  return `${id} ${lines.length}\r\n${lines.map((line) => `${line}\r\n`).join("")}`;
}

const addPing = (id: string, extra = "") => ({ conn: "a" as const, send: `add ${id} ping 1000 60000 4${extra}\r\nping\r\n`, reply: OK });

export const EXAMPLES: Example[] = [
  // First: queues are never removed, so later examples would add theirs.
  {
    name: "inspect queues",
    steps: [
      ...[1, 2, 3].map((n) => ({ conn: "a" as const, send: `add ${C4.slice(0, -1)}${n} ping1 1000 60000 4\r\nping\r\n`, reply: OK })),
      ...[1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => ({
        conn: "a" as const,
        send: `add 7ba7b810-9dad-11d1-80b4-00c04fd430c${n} ping2 1000 60000 4\r\nping\r\n`,
        reply: OK,
      })),
      {
        conn: "a",
        send: "inspect queues 0 10\r\n",
        reply: "+OK 2\r\nping1 2\r\nready-len 3\r\nscheduled-len 0\r\nping2 2\r\nready-len 9\r\nscheduled-len 0\r\n",
      },
      { conn: "a", send: "inspect queues 1 1\r\n", reply: "+OK 1\r\nping2 2\r\nready-len 9\r\nscheduled-len 0\r\n" },
      { conn: "a", send: "inspect queues 2 10\r\n", reply: "+OK 0\r\n" },
    ],
  },
  {
    name: "add with every flag, then inspect job, then delete",
    steps: [
      { conn: "a", send: `add ${C4} ping 1000 60000 4 -priority=10 -max-attempts=3 -max-fails=1\r\npong\r\n`, reply: OK },
      {
        conn: "a",
        send: `inspect job ${C4}\r\n`,
        reply: `+OK 1\r\n${block(C4, { payload: "pong", maxAttempts: 3, maxFails: 1, priority: 10 })}`,
      },
      { conn: "a", send: `delete ${C4}\r\n`, reply: OK },
      { conn: "a", send: `inspect job ${C4}\r\n`, reply: "-NOT-FOUND\r\n" },
    ],
  },
  {
    name: "inspect job of a job with the defaults",
    steps: [
      { conn: "a", send: `add ${C4} ping 1000 600000 4\r\nping\r\n`, reply: OK },
      { conn: "a", send: `inspect job ${C4}\r\n`, reply: `+OK 1\r\n${block(C4, { ttl: 600000 })}` },
    ],
  },
  {
    name: "inspect jobs, inspect queue, schedule and inspect scheduled-jobs",
    steps: [
      addPing(C4),
      addPing(C6),
      { conn: "a", send: "inspect jobs ping 0 10\r\n", reply: `+OK 2\r\n${block(C4)}${block(C6)}` },
      { conn: "a", send: "inspect jobs ping 1 10\r\n", reply: `+OK 1\r\n${block(C6)}` },
      addPing(C5),
      { conn: "a", send: "inspect queue ping\r\n", reply: "+OK 1\r\nping 2\r\nready-len 3\r\nscheduled-len 0\r\n" },
      { conn: "a", send: `schedule ${C9} ping 1000 60000 2036-09-01T18:00:00Z 4\r\nping\r\n`, reply: OK },
      { conn: "a", send: `schedule ${C8} ping 1000 60000 2036-09-01T19:00:00Z 4\r\nping\r\n`, reply: OK },
      {
        conn: "a",
        send: "inspect scheduled-jobs ping 0 10\r\n",
        reply: `+OK 2\r\n${block(C9, { time: "2036-09-01T18:00:00Z" })}${block(C8, { time: "2036-09-01T19:00:00Z" })}`,
      },
      { conn: "a", send: "inspect queue ping\r\n", reply: "+OK 1\r\nping 2\r\nready-len 3\r\nscheduled-len 2\r\n" },
      { conn: "a", send: `schedule ${C7} ping 1000 2000 2036-06-14T06:46:46Z 4\r\npong\r\n`, reply: OK },
    ],
  },
  {
    name: "run, answered once a worker completes the job; the job is gone afterwards",
    steps: [
      { conn: "a", send: `run ${C4} ping 1000 60000 4\r\nping\r\n` },
      { conn: "b", send: "lease ping ping2 ping3 60000\r\n", reply: `+OK 1\r\n${C4} ping 1000 4\r\nping\r\n` },
      { conn: "b", send: `complete ${C4} 4\r\npong\r\n`, reply: OK },
      { conn: "a", reply: `+OK 1\r\n${C4} 1 4\r\npong\r\n` },
      { conn: "a", send: `result ${C4} 0\r\n`, reply: "-NOT-FOUND\r\n" },
    ],
  },
  {
    name: "lease, complete and result; a second complete; a lease with nothing to lease",
    steps: [
      addPing(C6, " -priority=10"),
      { conn: "b", send: "lease ping1 ping2 ping 60000\r\n", reply: `+OK 1\r\n${C6} ping 1000 4\r\nping\r\n` },
      { conn: "a", send: `result ${C6} 0\r\n`, reply: "-TIMEOUT\r\n" },
      { conn: "a", send: `result ${C6} 60000\r\n` },
      { conn: "b", send: `complete ${C6} 4\r\npong\r\n`, reply: OK },
      { conn: "a", reply: `+OK 1\r\n${C6} 1 4\r\npong\r\n` },
      { conn: "b", send: `complete ${C6} 4\r\npong\r\n`, reply: "-CLIENT-ERROR Duplicate result\r\n" },
      { conn: "b", send: "lease ping 100\r\n", reply: "-TIMEOUT\r\n" },
    ],
  },
  {
    name: "fail: the job ends failed (success 0 in its result)",
    steps: [
      addPing(C7),
      { conn: "b", send: "lease ping 1000\r\n", reply: `+OK 1\r\n${C7} ping 1000 4\r\nping\r\n` },
      { conn: "b", send: `fail ${C7} 4\r\noops\r\n`, reply: OK },
      // The fail's result is kept and answered, with success 0.
      { conn: "a", send: `result ${C7} 1000\r\n`, reply: `+OK 1\r\n${C7} 0 4\r\noops\r\n` },
      { conn: "a", send: `inspect job ${C7}\r\n` },
    ],
  },
  {
    name: "inspect server",
    steps: [
      { conn: "a", send: "inspect server\r\n", reply: "+OK 1\r\nserver 3\r\nactive-clients 2\r\nevicted-jobs 0\r\nstarted <now>\r\n" },
    ],
  },
];
