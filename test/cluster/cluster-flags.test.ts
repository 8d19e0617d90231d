import { describe, expect, it } from "vitest";
import { parseServeArgs, type ServerConfig } from "../../src/config.js";

const STORE = ["--store", "postgres://worq@db:5432/worq"];
const parse = (argv: string[], env: NodeJS.ProcessEnv = {}) => parseServeArgs(argv, env) as ServerConfig;

describe("worq serve --cluster flags", () => {
  it("--cluster takes --node-id and --advertise-host, or their environment variables", () => {
    expect(parse([...STORE, "--cluster", "--node-id", "worq-1.a_b", "--advertise-host", "worq-1.internal"]).cluster).toEqual({
      nodeId: "worq-1.a_b",
      advertiseHost: "worq-1.internal",
    });
    expect(parse(STORE, { WORQ_CLUSTER: "1", WORQ_NODE_ID: "n2" }).cluster).toMatchObject({ nodeId: "n2", advertiseHost: "127.0.0.1" });
  });

  it("defaults: the node id is <hostname>-<pid>; a wildcard --host advertises the hostname", () => {
    const config = parse([...STORE, "--cluster", "--host", "0.0.0.0", "--insecure"]);
    expect(config.cluster!.nodeId).toMatch(new RegExp(`-${process.pid}$`));
    expect(config.cluster!.advertiseHost).not.toBe("0.0.0.0");
  });

  it("refuses --cluster without a PostgreSQL store, a bad node id, and cluster flags without --cluster", () => {
    expect(() => parse(["--cluster"])).toThrow(/--cluster needs --store postgres/);
    expect(() => parse([...STORE, "--cluster", "--node-id", "has space"])).toThrow(/--node-id must be 1-48 of/);
    expect(() => parse([...STORE, "--cluster", "--node-id", "x".repeat(49)])).toThrow(/--node-id must be 1-48 of/);
    expect(() => parse([...STORE, "--node-id", "n1"])).toThrow(/--node-id is a cluster setting: it needs --cluster/);
    expect(() => parse([...STORE, "--cluster", "--cluster-ca", "ca.pem"])).toThrow(/--cluster-ca .* needs --tls-cert/);
  });

  it("with TLS, the links trust --cluster-ca, else --tls-client-ca, else the node's own certificate", () => {
    const tls = ["--tls-cert", "node.pem", "--tls-key", "node-key.pem"];
    expect(parse([...STORE, "--cluster", ...tls]).cluster!.caFile).toBe("node.pem");
    expect(parse([...STORE, "--cluster", ...tls, "--tls-client-ca", "clients.pem"]).cluster!.caFile).toBe("clients.pem");
    expect(parse([...STORE, "--cluster", ...tls, "--tls-client-ca", "clients.pem", "--cluster-ca", "nodes.pem"]).cluster!.caFile).toBe(
      "nodes.pem",
    );
  });

  it("--partitions takes 1 to 1024 with --cluster; refuses what a partitioned node does not serve yet", () => {
    expect(parse([...STORE, "--cluster", "--node-id", "n1", "--partitions", "16"]).cluster!.partitions).toBe(16);
    expect(parse(STORE, { WORQ_CLUSTER: "1", WORQ_PARTITIONS: "4" }).cluster!.partitions).toBe(4);
    expect(parse([...STORE, "--cluster"]).cluster!.partitions).toBeUndefined();
    expect(() => parse([...STORE, "--cluster", "--partitions", "0"])).toThrow(/--partitions must be 1 to 1024, got 0/);
    expect(() => parse([...STORE, "--cluster", "--partitions", "1025"])).toThrow(/--partitions must be 1 to 1024/);
    expect(() => parse([...STORE, "--cluster", "--partitions", "four"])).toThrow(/--partitions/);
    expect(() => parse([...STORE, "--partitions", "4"])).toThrow(/--partitions is a cluster setting: it needs --cluster/);
    expect(parse([...STORE, "--cluster", "--partitions", "4", "--faktory-port", "0"]).faktoryPort).toBe(0);
    expect(parse([...STORE, "--cluster", "--partitions", "4", "--workq-port", "0"]).workqPort).toBe(0);
  });
});
