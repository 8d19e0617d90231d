import { pino, type Logger as Pino } from "pino";

/**
 * Structured logs: one JSON object per line on stderr (pino). Job payloads, args and results
 * are never logged (they may hold sensitive data); ids, types and states are.
 */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  /** Whether debug lines are written (skip building their fields otherwise). */
  readonly debugEnabled: boolean;
}

export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";

/** `fields` go on every line (a cluster node's id, say). */
export function createLogger(
  level: LogLevel = "info",
  destination: NodeJS.WritableStream = process.stderr,
  fields?: Record<string, unknown>,
): Logger {
  const log: Pino = pino({ level, base: fields, timestamp: pino.stdTimeFunctions.isoTime }, destination);
  return {
    debug: (message, fields = {}) => log.debug(fields, message),
    info: (message, fields = {}) => log.info(fields, message),
    warn: (message, fields = {}) => log.warn(fields, message),
    error: (message, fields = {}) => log.error(fields, message),
    get debugEnabled() {
      return log.isLevelEnabled("debug");
    },
  };
}
