/**
 * The exit codes scripts can rely on (printed by `worq --help`). They never change meaning:
 * add a new code rather than reuse one.
 */
export const EXIT = {
  /** The command did what it was asked. */
  ok: 0,
  /** The server refused or failed the operation (not found, invalid argument, unimplemented…), or a job ended badly. */
  failed: 1,
  /** The command line was wrong: unknown command or flag, bad flag value, unreadable input. */
  usage: 2,
  /** A wait (`result --wait`) ran out before the job finished. */
  timedOut: 3,
  /** The server could not be reached, or did not answer in time. */
  unreachable: 4,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export const EXIT_CODES_HELP = `Exit codes:
  0  ok
  1  the server refused or failed the operation (worq: <CODE>: <message>), or the job ended
     FAILED, DEAD_LETTER or CANCELLED (result)
  2  usage error: unknown command or flag, bad flag value, unreadable input
  3  a wait ran out before the job finished (result --wait)
  4  cannot reach the server`;

/** An error the CLI reports as one line on stderr, then exits with `exitCode`. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode,
  ) {
    super(message);
    this.name = "CliError";
  }
}

/** A bad flag value or input file: exit 2. */
export function usageError(message: string): CliError {
  return new CliError(message, EXIT.usage);
}
