/** Structured logs: one JSON object per line on stderr. */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export type LogLevel = "info" | "warn" | "error" | "silent";

const RANK: Record<LogLevel, number> = { info: 0, warn: 1, error: 2, silent: 3 };

export function createLogger(level: LogLevel = "info", write: (line: string) => void = (line) => process.stderr.write(line)): Logger {
  const emit = (at: Exclude<LogLevel, "silent">) => (message: string, fields: Record<string, unknown> = {}) => {
    if (RANK[at] < RANK[level]) return;
    write(`${JSON.stringify({ time: new Date().toISOString(), level: at, msg: message, ...fields })}\n`);
  };
  return { info: emit("info"), warn: emit("warn"), error: emit("error") };
}
