import { describe, expect, it } from "vitest";
import { parseServeArgs, SERVE_HELP, serveCommand, type ServerConfig } from "../src/config.js";

const parse = (argv: string[], env: NodeJS.ProcessEnv = {}) => parseServeArgs(argv, env) as ServerConfig;

describe("worq serve: hardening flags", () => {
  it("defaults: 1024 connections per port, 10 s header timeout, 10,000 queues, 4 webhooks per target, unsigned webhooks", () => {
    const config = parse([]);
    expect({
      maxConnectionsPerPort: config.maxConnectionsPerPort,
      headerTimeoutMs: config.headerTimeoutMs,
      maxQueues: config.maxQueues,
      webhookConcurrencyPerTarget: config.webhookConcurrencyPerTarget,
      webhookSecretFile: config.webhookSecretFile,
      insecure: config.insecure,
    }).toEqual({
      maxConnectionsPerPort: 1024,
      headerTimeoutMs: 10_000,
      maxQueues: 10_000,
      webhookConcurrencyPerTarget: 4,
      webhookSecretFile: undefined,
      insecure: undefined,
    });
  });

  it("flags, and environment variables under them", () => {
    const flags = [
      "--max-connections",
      "50",
      "--header-timeout",
      "2s",
      "--max-queues",
      "300",
      "--webhook-concurrency-per-target",
      "2",
      "--webhook-secret-file",
      "/run/secret",
      "--insecure",
    ];
    expect(parse(flags)).toMatchObject({
      maxConnectionsPerPort: 50,
      headerTimeoutMs: 2_000,
      maxQueues: 300,
      webhookConcurrencyPerTarget: 2,
      webhookSecretFile: "/run/secret",
      insecure: true,
    });
    const env = {
      WORQ_MAX_CONNECTIONS: "60",
      WORQ_HEADER_TIMEOUT: "500ms",
      WORQ_MAX_QUEUES: "7",
      WORQ_WEBHOOK_CONCURRENCY_PER_TARGET: "1",
      WORQ_WEBHOOK_SECRET_FILE: "/etc/worq/hook.secret",
    };
    expect(parse([], env)).toMatchObject({
      maxConnectionsPerPort: 60,
      headerTimeoutMs: 500,
      maxQueues: 7,
      webhookConcurrencyPerTarget: 1,
      webhookSecretFile: "/etc/worq/hook.secret",
    });
    expect(parse(["--max-queues", "8"], env).maxQueues).toBe(8);
  });

  it("refuses zero or malformed values, naming the flag", () => {
    expect(() => parse(["--max-connections", "0"])).toThrow("--max-connections must be between 1 and 1000000");
    expect(() => parse(["--max-queues", "0"])).toThrow("--max-queues must be between 1 and 10000000");
    expect(() => parse(["--max-queues", "ten"])).toThrow('--max-queues must be a whole number, got "ten"');
    expect(() => parse(["--webhook-concurrency-per-target", "0"])).toThrow("--webhook-concurrency-per-target must be between 1 and 1000");
    expect(() => parse(["--header-timeout", "50ms"])).toThrow("--header-timeout must be between 100ms and 24h");
    expect(() => parse(["--submit-timeout", "50ms"])).toThrow("--submit-timeout must be between 100ms and 1h");
    expect(() => parse(["--submit-timeout", "2h"])).toThrow("--submit-timeout must be between 100ms and 1h");
    expect(parse(["--submit-timeout", "5s"]).submitTimeoutMs).toBe(5_000);
    expect(parse([]).submitTimeoutMs).toBe(30_000);
    expect(() => parse(["--header-timeout", "10"])).toThrow(/^--header-timeout must be a duration like 500ms/);
    // Past Node's longest timer (about 24.8 days) a deadline fires at once: every connection would be cut.
    expect(() => parse(["--header-timeout", "1000h"])).toThrow("--header-timeout must be between 100ms and 24h");
    expect(parse(["--header-timeout", "24h"]).headerTimeoutMs).toBe(86_400_000);
    expect(() => parse(["--orphan-grace", "25h"])).toThrow("--orphan-grace must be between 0s and 24h");
    expect(() => parse(["--idempotency-window", "8761h"])).toThrow("--idempotency-window must be between 0s and 8760h");
    expect(() => parse(["--max-calls", "9".repeat(400)])).toThrow(/^--max-calls is too large/);
    expect(() => parse(["--orphan-grace", `${"9".repeat(400)}h`])).toThrow(/^--orphan-grace is too long/);
  });

  it("--workq-port: off unless given; with --auth-tokens it needs --workq-token-file", () => {
    expect(parse([]).workqPort).toBeUndefined();
    expect(parse(["--workq-port", "9922"]).workqPort).toBe(9922);
    expect(parse([], { WORQ_WORKQ_PORT: "0" }).workqPort).toBe(0);
    expect(() => parse(["--workq-port", "9922", "--auth-tokens", "/etc/worq/tokens"])).toThrow(
      /^--workq-port with --auth-tokens needs --workq-token-file <file>: Workq's protocol has no authentication/,
    );
    expect(
      parse(["--workq-port", "9922", "--auth-tokens", "/etc/worq/tokens", "--workq-token-file", "/etc/worq/workq.token"]).workqTokenFile,
    ).toBe("/etc/worq/workq.token");
    // In a cluster every node serves it: followers pass each connection to the leader's.
    expect(
      parse(["--workq-port", "9922", "--faktory-port", "7421", "--cluster", "--store", "postgres://db/worq", "--node-id", "n1"]),
    ).toMatchObject({
      workqPort: 9922,
      faktoryPort: 7421,
    });
    expect(() => parse(["--workq-token-file", "/etc/worq/workq.token"])).toThrow(
      "--workq-token-file is only used with both --workq-port and --auth-tokens",
    );
  });

  it("--help lists each of them", () => {
    for (const flag of [
      "--workq-port",
      "--workq-token-file",
      "--max-connections",
      "--header-timeout",
      "--max-queues",
      "--webhook-secret-file",
      "--webhook-concurrency-per-target",
    ]) {
      expect(SERVE_HELP, flag).toContain(`  ${flag} <`);
    }
  });

  it("--help lists every flag serve accepts, and an unknown flag is refused by name", () => {
    const flags = serveCommand().options.map((option) => option.long!);
    expect(flags).toContain("--insecure");
    for (const flag of flags) expect(SERVE_HELP, flag).toMatch(new RegExp(`^  (?:-h, )?${flag}(?: |$)`, "m"));
    expect(() => parse(["--bogus"])).toThrow("unknown option '--bogus'");
    expect(() => parse(["--port"])).toThrow("option '--port <n>' argument missing");
    expect(parseServeArgs(["--help"], {})).toBe("help");
  });
});
