/**
 * Workq's framing (docs/workq-protocol.md), pure and incremental: bytes go in as they arrive
 * (a command may be split across reads, several may come in one), whole commands come out.
 * A command is a line of space-separated ASCII tokens ended by CRLF; add, schedule, run,
 * complete and fail are followed by a data block of the size their line names, then CRLF.
 */

/** Largest command line (without its CRLF); a longer one closes the connection. */
const MAX_LINE_BYTES = 10_000;
/** Largest data block (payload or result). */
export const MAX_BLOCK_BYTES = 1_048_576;

/** One parsed command: its name, positional arguments, `-key=value` flags and data block. */
export interface WorkqCommand {
  name: string;
  args: string[];
  flags: Map<string, string>;
  /** Set when a flag was malformed or repeated (the command layer answers "Invalid command flags"). */
  badFlags: boolean;
  /** The command line as it came (without its CRLF), for a node that passes the command on. */
  line: string;
  block?: Buffer;
}

/** What the parser yields: a command, or an error to answer (and then close the connection when `close`). */
export type Frame = { kind: "command"; command: WorkqCommand } | { kind: "error"; message: string; close: boolean };

/** Commands followed by a data block: how many positional arguments they take, and which one is the size. */
const BLOCK_COMMANDS: Record<string, { args: number; sizeError: string }> = {
  add: { args: 5, sizeError: "Invalid payload size" },
  schedule: { args: 6, sizeError: "Invalid payload size" },
  run: { args: 5, sizeError: "Invalid payload size" },
  complete: { args: 2, sizeError: "Invalid payload size" },
  fail: { args: 2, sizeError: "Invalid result size" },
};

const CRLF = Buffer.from("\r\n");

/**
 * The parser of one connection. After a frame with `close`, nothing more is parsed: the
 * stream can no longer be split into commands safely (a data block of unknown size).
 */
export class WorkqParser {
  private buffer = Buffer.alloc(0);
  private awaiting: { command: WorkqCommand; size: number; sizeError: string } | undefined;
  private closed = false;

  /** Whether part of a command has arrived and the rest has not. */
  get partial(): boolean {
    return !this.closed && (this.awaiting !== undefined || this.buffer.length > 0);
  }

  /** Bytes received and not yet parsed. */
  get buffered(): number {
    return this.buffer.length;
  }

  /** Takes the next bytes received; returns the frames they complete, in order. */
  push(chunk: Uint8Array): Frame[] {
    if (this.closed) return [];
    this.buffer = this.buffer.length === 0 ? Buffer.from(chunk) : Buffer.concat([this.buffer, chunk]);
    const frames: Frame[] = [];
    for (;;) {
      const frame = this.awaiting ? this.takeBlock() : this.takeLine();
      if (!frame) return frames;
      frames.push(frame);
      if (frame.kind === "error" && frame.close) {
        this.closed = true;
        this.buffer = Buffer.alloc(0);
        return frames;
      }
    }
  }

  private takeBlock(): Frame | undefined {
    const { command, size, sizeError } = this.awaiting!;
    if (this.buffer.length < size + 2) return undefined;
    this.awaiting = undefined;
    if (!this.buffer.subarray(size, size + 2).equals(CRLF)) return { kind: "error", message: sizeError, close: true };
    command.block = Buffer.from(this.buffer.subarray(0, size));
    this.buffer = this.buffer.subarray(size + 2);
    return { kind: "command", command };
  }

  private takeLine(): Frame | undefined {
    const end = this.buffer.indexOf(10); // LF
    if (end < 0) {
      return this.buffer.length > MAX_LINE_BYTES ? { kind: "error", message: "Command line too long", close: true } : undefined;
    }
    if (end > MAX_LINE_BYTES + 1) return { kind: "error", message: "Command line too long", close: true };
    if (end === 0 || this.buffer[end - 1] !== 13) return { kind: "error", message: "Commands end in CRLF", close: true };
    const line = this.buffer.subarray(0, end - 1).toString("latin1");
    this.buffer = this.buffer.subarray(end + 1);
    const command = parseLine(line);
    const block = BLOCK_COMMANDS[command.name];
    if (!block) return { kind: "command", command };
    // The data block's size decides where the next command starts: without it the stream
    // cannot be followed, so a wrong argument count or size closes the connection.
    if (command.args.length !== block.args) return { kind: "error", message: "Invalid command args", close: true };
    const size = parseSize(command.args[block.args - 1]!);
    if (size === undefined) return { kind: "error", message: block.sizeError, close: true };
    this.awaiting = { command, size, sizeError: block.sizeError };
    return this.takeBlock();
  }
}

/** A command line split into its name, positional arguments and flags. */
function parseLine(line: string): WorkqCommand {
  const [name = "", ...rest] = line.split(" ");
  const args: string[] = [];
  const flags = new Map<string, string>();
  let badFlags = false;
  for (const token of rest) {
    if (token === "") continue;
    const eq = token.indexOf("=");
    if (token.startsWith("-") && eq >= 0) {
      const key = token.slice(1, eq);
      const value = token.slice(eq + 1);
      if (key === "" || value === "" || flags.has(key)) badFlags = true;
      flags.set(key, value);
    } else {
      args.push(token);
    }
  }
  return { name, args, flags, badFlags, line };
}

/** A data block size: decimal digits, 0 to MAX_BLOCK_BYTES; undefined otherwise. */
function parseSize(text: string): number | undefined {
  if (!/^\d{1,7}$/.test(text)) return undefined;
  const size = Number(text);
  return size <= MAX_BLOCK_BYTES ? size : undefined;
}
