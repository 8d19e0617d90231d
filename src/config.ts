import { hostname } from "node:os";
import { Command, CommanderError, Option } from "commander";
import { LIMITS } from "./model/limits.js";
import { MAX_PARTITIONS, parseSpreadQueues, type SpreadQueues } from "./model/partition.js";
import type { LogLevel } from "./log.js";
import { parseSubmitRate, type SubmitRate } from "./transport/auth/submit-rate.js";

/**
 * The longest each duration flag takes. A timer of Node's longer than about 24.8 days fires
 * at once (its delay overflows), and a deadline must stay a safe integer of ms when a job's
 * times are added to it.
 */
const MAX_DURATION_MS = { day: 86_400_000, year: 365 * 86_400_000 };

/** The most each count flag takes: a cap is a bound, and one past any machine's reach reads as a typo. */
const MAX_COUNT = { calls: 1_000_000, queues: 10_000_000, connections: 1_000_000, webhooksPerTarget: 1_000 };

export interface ServerConfig {
  host: string;
  /** gRPC port; 0 picks a free one (printed on start). */
  port: number;
  /** HTTP side: Connect protocol, /healthz, /metrics. */
  httpPort: number;
  /** Workq text-protocol port (src/workq); unset = off, 0 = any free port. */
  workqPort?: number;
  /** File holding the token every Workq connection acts with; required when token auth is on. */
  workqTokenFile?: string;
  /** Faktory work-protocol port (src/faktory); unset = off, 0 = any free port. */
  faktoryPort?: number;
  /** File of the passwords Faktory clients prove: tokens of --auth-tokens, or one shared password without token auth. */
  faktoryPasswordFile?: string;
  dataDir: string;
  /** A postgres:// URL to keep the data in PostgreSQL instead of LevelDB in dataDir. */
  store?: string;
  maxJobBytes: number;
  /** How long a disconnected worker's leases stay valid without a Renew. */
  orphanGraceMs: number;
  /** Ready jobs kept in memory per queue and priority; a deeper backlog waits in the store. */
  readyWindow: number;
  /** Keepalive message interval on idle Lease streams. */
  keepaliveIntervalMs: number;
  /** How long an idempotency key deduplicates submits of its job type. */
  idempotencyWindowMs: number;
  /** Submission timeout: a submit not stored within it is answered DEADLINE_EXCEEDED and withdrawn (default 30 s). */
  submitTimeoutMs?: number;
  /** Calls (unary and streams, all connections together) served at once; beyond it RESOURCE_EXHAUSTED. */
  maxConcurrentCalls: number;
  /** Origins that callback_url webhooks may target; empty = none. */
  callbackAllow: string[];
  /** OTLP/HTTP endpoint (e.g. http://collector:4318) the server's job spans go to; unset = no tracing (docs/tracing.md). */
  otlpEndpoint?: string;
  /** JSON file of schedules applied at start (docs/schedules.md): {"schedules": [Schedule in proto JSON]}. */
  schedulesFile?: string;
  /** File holding the key that signs webhooks (Worq-Signature header); unset = unsigned. */
  webhookSecretFile?: string;
  /** Webhooks in flight at once to one origin (default 4). */
  webhookConcurrencyPerTarget?: number;
  /** Distinct queue names the server keeps; a submit that would add one more is refused (default LIMITS.defaultMaxQueues). */
  maxQueues?: number;
  /** Open connections per port; more are closed at once (default DEFAULT_MAX_CONNECTIONS). */
  maxConnectionsPerPort?: number;
  /** How long a new connection may take to send its request headers (HTTP) or HTTP/2 preface (gRPC). */
  headerTimeoutMs?: number;
  logLevel: LogLevel;
  /** TLS on both ports; with clientCaFile, clients must present a certificate it signed (mTLS). */
  tls?: { certFile: string; keyFile: string; clientCaFile?: string };
  /** File of hashed bearer tokens with roles (docs/security.md); unset = no token auth. */
  authTokensFile?: string;
  /** gRPC reflection without a token when token auth is on. */
  publicReflection?: boolean;
  /** --insecure was given: a non-loopback bind may lack TLS or client authentication. */
  insecure?: boolean;
  /** Per-token limit on submitted jobs. */
  submitRate?: SubmitRate;
  /** Host header names the HTTP port answers besides loopback names (src/http/http-door.ts); `*` = any. */
  httpAllowedHosts?: string[];
  /** Run as one node of a cluster on the --store database (src/cluster, docs/deploy.md). */
  cluster?: ClusterConfig;
  /**
   * Engines on this machine (--engines, docs/scale-out.md "Cores on one machine"): the job
   * space split into this many partitions, each an engine process of its own on its own
   * LevelDB store under the data directory. Unset or 1: the one engine, in-process.
   */
  engines?: number;
  /** Set only in an engine process of --engines (src/engine-child.ts): the partition it serves. Never from a flag. */
  engineSlot?: { index: number; count: number; spread: SpreadQueues };
  /**
   * Set only in a partition's server or an engine process whose Faktory and Workq ports serve
   * its node's (src/cluster/faktory-router.ts, workq-router.ts): those ports' connection cap,
   * two per connection the node's port keeps. Never from a flag.
   */
  lineMaxConnections?: number;
  /**
   * Hot queues spread over several partitions (--spread-queues, with --partitions or
   * --engines): fixed when the cluster or data dir is created, as the partition count is.
   */
  spreadQueues?: SpreadQueues;
}

export interface ClusterConfig {
  /** Names this node in server info and worker labels; 1–48 of [A-Za-z0-9._-]. */
  nodeId: string;
  /** The host other nodes and clients reach this node at (its ports are the bound ones). */
  advertiseHost: string;
  /** With TLS: the CA bundle a leader's certificate must chain to, on the links between nodes. */
  caFile?: string;
  /**
   * Split the job space into this many partitions, served by the nodes together
   * (docs/scale-out.md); unset: one leader runs the one engine.
   */
  partitions?: number;
}

/** Default of --max-connections: open connections per port. */
export const DEFAULT_MAX_CONNECTIONS = 1024;
/** Default of --header-timeout. */
export const DEFAULT_HEADER_TIMEOUT_MS = 10_000;
/** Default of --webhook-concurrency-per-target. */
const DEFAULT_WEBHOOK_CONCURRENCY_PER_TARGET = 4;

/** The flags of `worq serve`, each with its environment variable; grouped as its help shows them. */
const SERVE_OPTIONS: ReadonlyArray<{ group: string; flags: string; help: string }> = [
  ...group("Options (environment variable in brackets):", [
    ["--host <addr>", "address to bind [WORQ_HOST] (default 127.0.0.1)"],
    ["--port <n>", "gRPC port, 0 = any free port [WORQ_PORT] (default 7419)"],
    [
      "--http-port <n>",
      "HTTP port: Connect protocol (curl), /healthz, /metrics [WORQ_HTTP_PORT] (default 7420; with --port 0, any free port)",
    ],
    [
      "--workq-port <n>",
      "serve Workq's text protocol on this port too, 0 = any free port (docs/workq-protocol.md) [WORQ_WORKQ_PORT] (default off)",
    ],
    [
      "--faktory-port <n>",
      "serve Faktory's work protocol on this port too, 0 = any free port (docs/faktory-protocol.md) [WORQ_FAKTORY_PORT] (default off)",
    ],
    ["--data-dir <dir>", "LevelDB data directory [WORQ_DATA_DIR] (default ./worq-data)"],
    [
      "--store <url>",
      "keep the data in PostgreSQL instead, e.g. postgres://worq@db:5432/worq [WORQ_STORE] (schema migrations applied on start; --data-dir is then unused)",
    ],
    [
      "--max-job-bytes <n>",
      `limit on args+kwargs+payload+custom of a job [WORQ_MAX_JOB_BYTES] (default ${LIMITS.defaultMaxJobBytes}, at most ${LIMITS.maxMaxJobBytes})`,
    ],
    ["--orphan-grace <duration>", "how long a disconnected worker keeps its leases [WORQ_ORPHAN_GRACE] (default 10s, at most 24h)"],
    [
      "--ready-window <n>",
      `ready jobs kept in memory per queue and priority; deeper backlogs wait on disk and are read in as the queue drains [WORQ_READY_WINDOW] (default ${LIMITS.defaultReadyWindow})`,
    ],
    ["--keepalive-interval <dur>", "keepalive on idle Lease streams [WORQ_KEEPALIVE_INTERVAL] (default 15s, at most 30s)"],
    [
      "--idempotency-window <dur>",
      "how long an idempotency key deduplicates submits [WORQ_IDEMPOTENCY_WINDOW] (default 24h, at most 8760h: a year)",
    ],
    [
      "--submit-timeout <dur>",
      "a submit not stored within this (or the caller's shorter deadline) is answered DEADLINE_EXCEEDED and withdrawn [WORQ_SUBMIT_TIMEOUT] (default 30s, 100ms to 1h)",
    ],
    [
      "--max-calls <n>",
      `calls served at once, all connections together; more get RESOURCE_EXHAUSTED [WORQ_MAX_CALLS] (default ${LIMITS.defaultMaxConcurrentCalls}, at most ${MAX_COUNT.calls})`,
    ],
    [
      "--max-queues <n>",
      `distinct queue names kept; a submit to one more is refused with RESOURCE_EXHAUSTED [WORQ_MAX_QUEUES] (default ${LIMITS.defaultMaxQueues}, at most ${MAX_COUNT.queues})`,
    ],
    [
      "--max-connections <n>",
      `open connections per port; more are closed at once [WORQ_MAX_CONNECTIONS] (default ${DEFAULT_MAX_CONNECTIONS}, at most ${MAX_COUNT.connections})`,
    ],
    [
      "--header-timeout <dur>",
      "a new connection that has not sent its request headers (HTTP port) or HTTP/2 preface and settings (gRPC port) by then is closed [WORQ_HEADER_TIMEOUT] (default 10s, 100ms to 24h)",
    ],
    [
      "--callback-allow <origins>",
      "comma-separated origins callback_url may target, e.g. https://hooks.example.com [WORQ_CALLBACK_ALLOW] (default none)",
    ],
    [
      "--otlp-endpoint <url>",
      "OTLP/HTTP collector (e.g. http://127.0.0.1:4318) that spans of traced jobs are sent to (docs/tracing.md) [OTEL_EXPORTER_OTLP_ENDPOINT] (default none: no tracing)",
    ],
    [
      "--schedules <file>",
      'JSON file of schedules applied at start, {"schedules": [...]} (docs/schedules.md); schedules it no longer lists are removed [WORQ_SCHEDULES]',
    ],
    [
      "--webhook-secret-file <f>",
      "key that signs webhooks: a Worq-Signature header on each (docs/webhooks.md); unset = unsigned [WORQ_WEBHOOK_SECRET_FILE]",
    ],
    [
      "--webhook-concurrency-per-target <n>",
      `webhooks in flight at once to one origin, of 8 in all [WORQ_WEBHOOK_CONCURRENCY_PER_TARGET] (default ${DEFAULT_WEBHOOK_CONCURRENCY_PER_TARGET}, at most ${MAX_COUNT.webhooksPerTarget})`,
    ],
    [
      "--log-level <level>",
      "debug | info | warn | error | silent [WORQ_LOG_LEVEL] (default info; debug logs every job state change, never job data)",
    ],
  ]),
  ...group("Cluster (several servers on one PostgreSQL database; docs/deploy.md):", [
    [
      "--cluster",
      "join the cluster of --store: one node leads (runs the engine), the others forward every call to it and take over when it dies [WORQ_CLUSTER=1]",
    ],
    ["--node-id <id>", "this node's name, 1-48 of A-Z a-z 0-9 . _ - [WORQ_NODE_ID] (default <hostname>-<pid>)"],
    [
      "--advertise-host <host>",
      "where the other nodes reach this one [WORQ_ADVERTISE_HOST] (default --host, or the hostname when --host is 0.0.0.0 or ::)",
    ],
    [
      "--cluster-ca <file>",
      "with TLS: PEM CA bundle the leader's certificate must chain to, on the links between nodes [WORQ_CLUSTER_CA] (default --tls-client-ca, else --tls-cert itself)",
    ],
    [
      "--engines <n>",
      "run n engine processes on this machine (1-64), the jobs split among them by queue, each with its own store under --data-dir (with --cluster --partitions: each a node of the cluster, sharing its partitions): capacity grows with cores (docs/scale-out.md) [WORQ_ENGINES] (default 1)",
    ],
    [
      "--partitions <n>",
      "split the jobs into n partitions (1-1024) that the nodes share, each served by one node: capacity grows with nodes (docs/scale-out.md; being built: docs/deploy.md lists what it refuses yet) [WORQ_PARTITIONS]",
    ],
    [
      "--spread-queues <list>",
      "with --partitions or --engines: spread hot queues over several partitions each, as queue=k pairs (e.g. emails=4,pdf=2); order holds within each partition; fixed when the cluster is created (docs/scale-out.md) [WORQ_SPREAD_QUEUES]",
    ],
  ]),
  ...group("Security (docs/security.md):", [
    ["--tls-cert <file>", "PEM certificate chain: serve TLS on both ports [WORQ_TLS_CERT]"],
    ["--tls-key <file>", "PEM private key of --tls-cert [WORQ_TLS_KEY]"],
    ["--tls-client-ca <file>", "PEM CA bundle: require client certificates it signed (mutual TLS) [WORQ_TLS_CLIENT_CA]"],
    [
      "--auth-tokens <file>",
      'bearer tokens with roles, one "<role> <name> sha256:<hex>" a line (make one with worq token create; SIGHUP re-reads the file) [WORQ_AUTH_TOKENS]',
    ],
    [
      "--workq-token-file <file>",
      "with --auth-tokens and --workq-port: a file holding one token of --auth-tokens; every Workq connection acts with its role and queues [WORQ_WORKQ_TOKEN_FILE]",
    ],
    [
      "--faktory-password-file <file>",
      "with --faktory-port: passwords Faktory clients must prove, one a line: tokens of --auth-tokens (required with it; each acts with its role and queues), or one shared password without it [WORQ_FAKTORY_PASSWORD_FILE]",
    ],
    ["--public-reflection", "serve gRPC reflection without a token (health is always open) [WORQ_PUBLIC_REFLECTION=1]"],
    [
      "--submit-rate <r>[:burst]",
      "at most r submitted jobs per second per token, bursts of up to burst (default r) jobs; over it: RESOURCE_EXHAUSTED [WORQ_SUBMIT_RATE]",
    ],
    [
      "--http-allowed-hosts <names>",
      "comma-separated Host names the HTTP port answers besides localhost, *.localhost, 127.0.0.1 and [::1] (a loopback --host answers only those; any other --host answers any name unless this is given); * for any [WORQ_HTTP_ALLOWED_HOSTS]",
    ],
    ["--insecure", "allow a non-loopback --host without TLS and client authentication [WORQ_INSECURE=1]"],
  ]),
];

function group(heading: string, options: Array<[flags: string, help: string]>): Array<{ group: string; flags: string; help: string }> {
  return options.map(([flags, help]) => ({ group: heading, flags, help }));
}

/**
 * The `worq serve` command with its flags and help, without an action: the CLI adds its action
 * (src/cli/program.ts), parseServeArgs parses with it alone. Values stay strings here: each is
 * checked once, flag or environment variable alike, by parseServeArgs.
 */
export function serveCommand(): Command {
  const command = new Command("serve")
    .summary("run the Worq server (see worq serve --help)")
    .description(
      "Runs the Worq server: gRPC on --host:--port, data in --data-dir (LevelDB) or, with --store, in a PostgreSQL database " +
        "(one server per database, or a --cluster of them; see docs/deploy.md).",
    )
    .addHelpText("after", "\nDurations: 500ms, 10s, 5m, 1h.")
    .helpOption(false);
  for (const option of SERVE_OPTIONS) command.addOption(new Option(option.flags, option.help).helpGroup(option.group));
  return command.addHelpOption(new Option("-h, --help", "show this help").helpGroup(SERVE_OPTIONS[0]!.group));
}

/** `worq serve --help`, as the CLI prints it off a terminal. */
export const SERVE_HELP = new Command("worq").addCommand(serveCommand()).commands[0]!.helpInformation().trimEnd();

type ServeValues = Partial<Record<string, string | true>>;

/**
 * Parses `worq serve` flags over environment variables over defaults. Throws a readable Error on
 * bad input. The flags are read by serveCommand() (commander), as `worq serve` reads them.
 */
export function parseServeArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): ServerConfig | "help" {
  const command = serveCommand()
    .exitOverride()
    .configureOutput({ writeOut: () => {}, writeErr: () => {}, outputError: () => {} });
  try {
    command.parse(argv, { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError && error.code === "commander.helpDisplayed") return "help";
    throw new Error(error instanceof CommanderError ? error.message.replace(/^error: /, "") : String(error));
  }
  return serveConfig(command.opts<ServeValues>(), env);
}

/** Each flag serveCommand() declares, without its dashes. */
const SERVE_FLAGS = new Set(SERVE_OPTIONS.map((option) => option.flags.split(" ")[0]!.slice(2)));

/**
 * The server's settings from commander's values of serveCommand()'s flags (keyed in camel case:
 * --data-dir is `dataDir`) over `env`, over the defaults. Throws a readable Error on bad input.
 */
export function serveConfig(values: ServeValues, env: NodeJS.ProcessEnv = process.env): ServerConfig {
  const valueOf = (flag: string) => {
    // The names below are plain strings: one that no option declares would read as never given.
    if (!SERVE_FLAGS.has(flag)) throw new Error(`--${flag} is not a worq serve flag`);
    return values[flag.replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase())];
  };
  const pick = (flag: string, envName: string) => {
    const value = valueOf(flag);
    return typeof value === "string" ? value : env[envName];
  };
  const pickSwitch = (flag: string, envName: string) => valueOf(flag) === true || env[envName] === "1";
  const config: ServerConfig = {
    // Bare (::1, not [::1]): both forms are accepted, and every bind and URL adds its own brackets.
    host: (pick("host", "WORQ_HOST") ?? "127.0.0.1").replace(/^\[(.*)\]$/, "$1"),
    port: parsePort(pick("port", "WORQ_PORT") ?? "7419", "--port"),
    httpPort: 0, // set below
    dataDir: pick("data-dir", "WORQ_DATA_DIR") ?? "./worq-data",
    maxJobBytes: parseInteger(pick("max-job-bytes", "WORQ_MAX_JOB_BYTES") ?? String(LIMITS.defaultMaxJobBytes), "--max-job-bytes"),
    orphanGraceMs: parseDurationMs(pick("orphan-grace", "WORQ_ORPHAN_GRACE") ?? "10s", "--orphan-grace"),
    readyWindow: parseInteger(pick("ready-window", "WORQ_READY_WINDOW") ?? String(LIMITS.defaultReadyWindow), "--ready-window"),
    keepaliveIntervalMs: parseDurationMs(pick("keepalive-interval", "WORQ_KEEPALIVE_INTERVAL") ?? "15s", "--keepalive-interval"),
    idempotencyWindowMs: parseDurationMs(pick("idempotency-window", "WORQ_IDEMPOTENCY_WINDOW") ?? "24h", "--idempotency-window"),
    submitTimeoutMs: parseDurationMs(pick("submit-timeout", "WORQ_SUBMIT_TIMEOUT") ?? "30s", "--submit-timeout"),
    maxConcurrentCalls: parseInteger(pick("max-calls", "WORQ_MAX_CALLS") ?? String(LIMITS.defaultMaxConcurrentCalls), "--max-calls"),
    callbackAllow: parseOrigins(pick("callback-allow", "WORQ_CALLBACK_ALLOW") ?? ""),
    ...otlpEndpointOf(pick("otlp-endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT")),
    webhookConcurrencyPerTarget: parseInteger(
      pick("webhook-concurrency-per-target", "WORQ_WEBHOOK_CONCURRENCY_PER_TARGET") ?? String(DEFAULT_WEBHOOK_CONCURRENCY_PER_TARGET),
      "--webhook-concurrency-per-target",
    ),
    maxQueues: parseInteger(pick("max-queues", "WORQ_MAX_QUEUES") ?? String(LIMITS.defaultMaxQueues), "--max-queues"),
    maxConnectionsPerPort: parseInteger(
      pick("max-connections", "WORQ_MAX_CONNECTIONS") ?? String(DEFAULT_MAX_CONNECTIONS),
      "--max-connections",
    ),
    headerTimeoutMs: parseDurationMs(pick("header-timeout", "WORQ_HEADER_TIMEOUT") ?? `${DEFAULT_HEADER_TIMEOUT_MS}ms`, "--header-timeout"),
    logLevel: parseLogLevel(pick("log-level", "WORQ_LOG_LEVEL") ?? "info"),
  };
  // With --port 0 (any free port, as tests and side-by-side servers use) the HTTP side also
  // takes any free port unless given, so two such servers never fight over 7420.
  config.httpPort = parsePort(pick("http-port", "WORQ_HTTP_PORT") ?? (config.port === 0 ? "0" : "7420"), "--http-port");
  const workqPort = pick("workq-port", "WORQ_WORKQ_PORT");
  if (workqPort !== undefined && workqPort !== "") config.workqPort = parsePort(workqPort, "--workq-port");
  const workqTokenFile = pick("workq-token-file", "WORQ_WORKQ_TOKEN_FILE");
  if (workqTokenFile !== undefined && workqTokenFile !== "") config.workqTokenFile = workqTokenFile;
  const faktoryPort = pick("faktory-port", "WORQ_FAKTORY_PORT");
  if (faktoryPort !== undefined && faktoryPort !== "") config.faktoryPort = parsePort(faktoryPort, "--faktory-port");
  const faktoryPasswordFile = pick("faktory-password-file", "WORQ_FAKTORY_PASSWORD_FILE");
  if (faktoryPasswordFile !== undefined && faktoryPasswordFile !== "") config.faktoryPasswordFile = faktoryPasswordFile;
  const store = pick("store", "WORQ_STORE");
  if (store !== undefined && store !== "") config.store = parseStoreUrl(store);
  if (config.maxJobBytes < 1 || config.maxJobBytes > LIMITS.maxMaxJobBytes) {
    throw new Error(`--max-job-bytes must be between 1 and ${LIMITS.maxMaxJobBytes}`);
  }
  Object.assign(config, securityOf(pick, pickSwitch));
  const allowedHosts = pick("http-allowed-hosts", "WORQ_HTTP_ALLOWED_HOSTS");
  if (allowedHosts !== undefined)
    config.httpAllowedHosts = allowedHosts
      .split(",")
      .map((name) => name.trim())
      .filter((name) => name !== "");
  checkRange("--max-calls", config.maxConcurrentCalls, 1, MAX_COUNT.calls);
  const schedulesFile = pick("schedules", "WORQ_SCHEDULES");
  if (schedulesFile !== undefined && schedulesFile !== "") config.schedulesFile = schedulesFile;
  const webhookSecretFile = pick("webhook-secret-file", "WORQ_WEBHOOK_SECRET_FILE");
  if (webhookSecretFile !== undefined && webhookSecretFile !== "") config.webhookSecretFile = webhookSecretFile;
  checkRange("--webhook-concurrency-per-target", config.webhookConcurrencyPerTarget!, 1, MAX_COUNT.webhooksPerTarget);
  checkRange("--max-queues", config.maxQueues!, 1, MAX_COUNT.queues);
  checkRange("--max-connections", config.maxConnectionsPerPort!, 1, MAX_COUNT.connections);
  checkRange("--header-timeout", config.headerTimeoutMs!, 100, MAX_DURATION_MS.day, durationText);
  checkRange("--submit-timeout", config.submitTimeoutMs!, 100, 3_600_000, durationText);
  checkRange("--orphan-grace", config.orphanGraceMs, 0, MAX_DURATION_MS.day, durationText);
  checkRange("--idempotency-window", config.idempotencyWindowMs, 0, MAX_DURATION_MS.year, durationText);
  if (config.readyWindow < 1 || config.readyWindow > LIMITS.maxReadyWindow)
    throw new Error(`--ready-window must be between 1 and ${LIMITS.maxReadyWindow}`);
  if (config.keepaliveIntervalMs < 10 || config.keepaliveIntervalMs > 30_000) {
    throw new Error("--keepalive-interval must be between 10ms and 30s");
  }
  if (config.authTokensFile !== undefined && config.workqPort !== undefined && config.workqTokenFile === undefined) {
    throw new Error(
      "--workq-port with --auth-tokens needs --workq-token-file <file>: Workq's protocol has no authentication, so every Workq connection acts with the role and queues of the token in that file",
    );
  }
  if (config.workqTokenFile !== undefined && (config.workqPort === undefined || config.authTokensFile === undefined)) {
    throw new Error("--workq-token-file is only used with both --workq-port and --auth-tokens");
  }
  if (config.authTokensFile !== undefined && config.faktoryPort !== undefined && config.faktoryPasswordFile === undefined) {
    throw new Error(
      "--faktory-port with --auth-tokens needs --faktory-password-file <file>: Faktory clients prove a password, so the file lists the tokens (of --auth-tokens) they may use as passwords",
    );
  }
  if (config.faktoryPasswordFile !== undefined && config.faktoryPort === undefined) {
    throw new Error("--faktory-password-file is only used with --faktory-port");
  }
  const engines = pick("engines", "WORQ_ENGINES");
  if (engines !== undefined) enginesOf(config, engines);
  if (pickSwitch("insecure", "WORQ_INSECURE")) config.insecure = true;
  refuseOpenNetworkBind(config, config.insecure === true);
  if (pickSwitch("cluster", "WORQ_CLUSTER")) {
    config.cluster = clusterOf(
      config,
      pick("node-id", "WORQ_NODE_ID"),
      pick("advertise-host", "WORQ_ADVERTISE_HOST"),
      pick("cluster-ca", "WORQ_CLUSTER_CA"),
    );
    const partitions = pick("partitions", "WORQ_PARTITIONS");
    if (partitions !== undefined) config.cluster.partitions = partitionsOf(config, partitions);
  } else {
    for (const [flag, envName] of [
      ["node-id", "WORQ_NODE_ID"],
      ["advertise-host", "WORQ_ADVERTISE_HOST"],
      ["cluster-ca", "WORQ_CLUSTER_CA"],
      ["partitions", "WORQ_PARTITIONS"],
    ] as const) {
      if (pick(flag, envName) !== undefined) throw new Error(`--${flag} is a cluster setting: it needs --cluster`);
    }
  }
  if (config.engines !== undefined && config.store !== undefined) {
    // On PostgreSQL the engines are nodes of a partitioned cluster, each named <node-id>.e<i>.
    if (config.cluster?.partitions === undefined) {
      throw new Error(
        `--store with --engines ${config.engines}: on PostgreSQL, engines share a partitioned cluster's partitions: add --cluster --partitions P`,
      );
    }
    if (config.cluster.nodeId.length > MAX_ENGINES_NODE_ID) {
      throw new Error(
        `--node-id with --engines: at most ${MAX_ENGINES_NODE_ID} chars (each engine process joins as <node-id>.e<i>), got ${config.cluster.nodeId.length}`,
      );
    }
  }
  const spread = pick("spread-queues", "WORQ_SPREAD_QUEUES");
  if (spread !== undefined) {
    const count = config.cluster?.partitions ?? config.engines;
    if (count === undefined || count < 2)
      throw new Error("--spread-queues spreads queues over partitions: it needs --partitions or --engines (2 or more)");
    config.spreadQueues = parseSpreadQueues(spread, count, "--spread-queues");
  }
  return config;
}

/** --engines: a count; more than one refuses what engine processes do not serve yet, by name. */
function enginesOf(config: ServerConfig, text: string): void {
  const count = parseInteger(text, "--engines");
  if (count < 1 || count > MAX_ENGINES) throw new Error(`--engines must be 1 to ${MAX_ENGINES}, got ${count}`);
  if (count === 1) return;
  config.engines = count;
}

/** The most engine processes --engines starts. */
const MAX_ENGINES = 64;
/** A --node-id's longest with --engines on PostgreSQL: its engines add ".e<i>" within the 48 a node id may have. */
const MAX_ENGINES_NODE_ID = 44;

/** --partitions: a count, and the doors a partitioned node does not serve yet refused by name. */
function partitionsOf(config: ServerConfig, text: string): number {
  const count = parseInteger(text, "--partitions");
  if (count < 1 || count > MAX_PARTITIONS) throw new Error(`--partitions must be 1 to ${MAX_PARTITIONS}, got ${count}`);
  return count;
}

function clusterOf(
  config: ServerConfig,
  nodeId: string | undefined,
  advertiseHost: string | undefined,
  caFile: string | undefined,
): ClusterConfig {
  if (config.store === undefined) {
    throw new Error(
      "--cluster needs --store postgres://…: the nodes of a cluster share one PostgreSQL database (LevelDB is one server's own)",
    );
  }
  const id =
    nodeId ??
    `${hostname()
      .replace(/[^A-Za-z0-9._-]/g, "-")
      .slice(0, 36)}-${process.pid}`;
  if (!/^[A-Za-z0-9._-]{1,48}$/.test(id)) throw new Error(`--node-id must be 1-48 of A-Z a-z 0-9 . _ -, got ${JSON.stringify(id)}`);
  if (caFile !== undefined && !config.tls)
    throw new Error("--cluster-ca is for TLS links between nodes: it needs --tls-cert and --tls-key");
  const wildcard = ["0.0.0.0", "::", "[::]"].includes(config.host);
  // The other nodes dial it as <host>:<port>, and the cluster's node table keeps it as text.
  if (advertiseHost === "") advertiseHost = undefined; // an empty WORQ_ADVERTISE_HOST reads as unset
  if (advertiseHost !== undefined && !/^(?:[A-Za-z0-9_.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]|[0-9A-Fa-f:.]{2,45})$/.test(advertiseHost))
    throw new Error(`--advertise-host must be a host name or an IP address, got ${JSON.stringify(advertiseHost)}`);
  return {
    nodeId: id,
    advertiseHost: advertiseHost ?? (wildcard ? hostname() : config.host),
    ...(config.tls && { caFile: caFile ?? config.tls.clientCaFile ?? config.tls.certFile }),
  };
}

function securityOf(
  pick: (flag: "tls-cert" | "tls-key" | "tls-client-ca" | "auth-tokens" | "submit-rate", envName: string) => string | undefined,
  pickSwitch: (flag: "public-reflection", envName: string) => boolean,
): Pick<ServerConfig, "tls" | "authTokensFile" | "publicReflection" | "submitRate"> {
  const certFile = pick("tls-cert", "WORQ_TLS_CERT");
  const keyFile = pick("tls-key", "WORQ_TLS_KEY");
  const clientCaFile = pick("tls-client-ca", "WORQ_TLS_CLIENT_CA");
  if ((certFile === undefined) !== (keyFile === undefined)) throw new Error("--tls-cert and --tls-key go together: give both or neither");
  if (clientCaFile !== undefined && certFile === undefined)
    throw new Error("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS first)");
  const submitRate = pick("submit-rate", "WORQ_SUBMIT_RATE");
  return {
    tls:
      certFile !== undefined && keyFile !== undefined
        ? { certFile, keyFile, ...(clientCaFile !== undefined && { clientCaFile }) }
        : undefined,
    authTokensFile: pick("auth-tokens", "WORQ_AUTH_TOKENS"),
    publicReflection: pickSwitch("public-reflection", "WORQ_PUBLIC_REFLECTION"),
    submitRate: submitRate === undefined ? undefined : parseSubmitRate(submitRate),
  };
}

/**
 * Anyone who can reach a non-loopback address can submit, read and delete jobs unless the
 * server checks who they are, and a bearer token sent in plaintext can be read off the wire:
 * such a bind needs TLS and client authentication (tokens or client certificates), or an
 * explicit --insecure (a trusted private network, a TLS-terminating proxy in front).
 */
function refuseOpenNetworkBind(config: ServerConfig, insecure: boolean): void {
  if (insecure || isLoopback(config.host)) return;
  const missing = [
    ...(config.tls ? [] : ["TLS (--tls-cert, --tls-key)"]),
    ...(config.authTokensFile || config.tls?.clientCaFile ? [] : ["client authentication (--auth-tokens or --tls-client-ca)"]),
  ];
  if (missing.length === 0) return;
  throw new Error(
    `refusing to listen on ${config.host}, which other machines can reach, without ${missing.join(" and ")}; ` +
      "add them, or pass --insecure if the network is trusted (docs/security.md)",
  );
}

export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, "").toLowerCase();
  return bare === "localhost" || bare === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(bare) || /^::ffff:127\./.test(bare);
}

function parseStoreUrl(text: string): string {
  if (!/^postgres(ql)?:\/\/./i.test(text)) {
    throw new Error(
      `--store must be a PostgreSQL URL like postgres://user@host:5432/db (omit it for LevelDB in --data-dir); got ${JSON.stringify(text.replace(/:[^:@/]*@/, ":***@"))}`,
    );
  }
  return text;
}

function parsePort(text: string, flag: string): number {
  const port = parseInteger(text, flag);
  if (port > 65535) throw new Error(`${flag} must be a port number (0-65535), got ${text}`);
  return port;
}

function parseInteger(text: string, flag: string): number {
  if (!/^\d+$/.test(text)) throw new Error(`${flag} must be a whole number, got ${JSON.stringify(text)}`);
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new Error(`${flag} is too large, got ${text}`);
  return value;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

function parseDurationMs(text: string, flag: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(text.trim());
  if (!match) throw new Error(`${flag} must be a duration like 500ms, 10s, 5m or 1h; got ${JSON.stringify(text)}`);
  const ms = Math.round(Number(match[1]) * UNIT_MS[match[2]!]!);
  if (!Number.isSafeInteger(ms)) throw new Error(`${flag} is too long, got ${text.trim()}`);
  return ms;
}

/** Refuses `value` of `flag` outside `[min, max]`, naming the flag and both bounds (`unit` after each, for durations). */
function checkRange(flag: string, value: number, min: number, max: number, show: (n: number) => string = String): void {
  if (value < min || value > max) throw new Error(`${flag} must be between ${show(min)} and ${show(max)}`);
}

/** A bound in ms as a flag is written: 100ms, 30s, 24h. */
function durationText(ms: number): string {
  if (ms === 0) return "0s";
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

function parseOrigins(text: string): string[] {
  return text
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part.length > 0)
    .map((part) => {
      let url: URL;
      try {
        url = new URL(part);
      } catch {
        throw new Error(`--callback-allow: ${JSON.stringify(part)} is not an origin like https://hooks.example.com`);
      }
      if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`--callback-allow: ${part} must be http or https`);
      return url.origin;
    });
}

function parseLogLevel(text: string): LogLevel {
  if (text === "debug" || text === "info" || text === "warn" || text === "error" || text === "silent") return text;
  throw new Error(`--log-level must be debug, info, warn, error or silent; got ${JSON.stringify(text)}`);
}

/** `--otlp-endpoint`: an http(s) URL, or unset (no tracing). */
function otlpEndpointOf(value: string | undefined): { otlpEndpoint?: string } {
  if (value === undefined || value === "") return {};
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`--otlp-endpoint: ${JSON.stringify(value)} is not a URL like http://127.0.0.1:4318`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new Error(`--otlp-endpoint: ${JSON.stringify(value)} must be http or https`);
  // Spans go to <endpoint>/v1/traces: a query or fragment would end up before that path, and
  // fetch refuses a URL with credentials, so every export would fail.
  if (url.username !== "" || url.password !== "" || /[?#]/.test(value)) {
    throw new Error(`--otlp-endpoint: ${JSON.stringify(value)} must have no user, password, query or fragment, like http://127.0.0.1:4318`);
  }
  return { otlpEndpoint: value };
}
