/** One syscall of an strace -f -y log, put back together if strace split it (<unfinished ...>). */
export interface Syscall {
  /** Position in the log of the line where the call completed: the order in which things happened. */
  index: number;
  name: string;
  /** The fd's path or socket as `-y` prints it, e.g. "/data/000003.log" or "socket:[123]". */
  target: string;
  /** Everything between the parentheses (with strings shown up to strace's -s). */
  args: string;
}

const LINE = /^(\d+)\s+(.*)$/;
const CALL = /^(\w+)\((\d+)<([^>]*)>(.*)$/;

/** Parses an `strace -f -y` log into completed syscalls, in order of completion. */
export function parseStrace(text: string): Syscall[] {
  const calls: Syscall[] = [];
  const unfinished = new Map<string, string>(); // pid -> the call's first half
  text.split("\n").forEach((raw, index) => {
    const line = LINE.exec(raw);
    if (!line) return;
    const [, pid, rest] = line as unknown as [string, string, string];
    let body = rest;
    if (body.endsWith("<unfinished ...>")) {
      unfinished.set(pid, body.slice(0, -"<unfinished ...>".length));
      return;
    }
    const resumed = /^<\.\.\. \w+ resumed>(.*)$/.exec(body);
    if (resumed) {
      body = (unfinished.get(pid) ?? "") + resumed[1];
      unfinished.delete(pid);
    }
    const call = CALL.exec(body);
    if (call) calls.push({ index, name: call[1]!, target: call[3]!, args: call[4]! });
  });
  return calls;
}

export interface AuditResult {
  submits: number;
  /** Acknowledged submits whose reply left before an fdatasync/fsync of the log write holding the job. */
  unsynced: string[];
  /** Acknowledged submits whose log write or reply was not found in the trace at all. */
  unmatched: string[];
  /** fdatasync/fsync calls on LevelDB log files during the run. */
  logSyncs: number;
}

/**
 * For each acknowledged jid: the LevelDB log write that holds it, the first fdatasync/fsync
 * of that log completing after the write, and the socket write carrying the reply (the jid
 * appears in both). The reply must come after the sync. Assumes one submit in flight at a time.
 */
export function auditSubmits(calls: Syscall[], jids: string[]): AuditResult {
  const isLog = (call: Syscall) => /\/\d+\.log$/.test(call.target);
  const writes = calls.filter((call) => call.name.startsWith("write") || call.name.startsWith("send"));
  const syncs = calls.filter((call) => (call.name === "fdatasync" || call.name === "fsync") && isLog(call));
  const unsynced: string[] = [];
  const unmatched: string[] = [];
  for (const jid of jids) {
    const logWrite = writes.find((call) => isLog(call) && call.args.includes(jid));
    const reply = writes.find((call) => /^(socket|TCP)/.test(call.target) && call.args.includes(jid));
    if (!logWrite || !reply) {
      unmatched.push(jid);
      continue;
    }
    const sync = syncs.find((call) => call.index > logWrite.index && call.target === logWrite.target);
    if (!sync || sync.index > reply.index) unsynced.push(jid);
  }
  return { submits: jids.length, unsynced, unmatched, logSyncs: syncs.length };
}
