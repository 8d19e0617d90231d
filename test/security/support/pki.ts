import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { commandWorks, toolAvailable } from "../../support/require-tool.js";

/** Whether the openssl CLI is here to make the test certificates (node:crypto cannot sign X.509). */
export const hasOpenssl = toolAvailable(
  "TLS (openssl-made certificates)",
  () => commandWorks("openssl", ["version"]),
  "no `openssl` on PATH",
);

/** PEM files of a throwaway PKI, and their contents. */
export interface Pki {
  dir: string;
  /** Paths. */
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A cluster node's certificate: server and client (the links between nodes are mutual TLS). */
  nodeCert: string;
  nodeKey: string;
  /** A client certificate signed by another CA, which the server must refuse. */
  strangerCert: string;
  strangerKey: string;
  read(path: string): Buffer;
}

/**
 * A CA, a server certificate for 127.0.0.1 and localhost, a client certificate from the same
 * CA and one from a stranger CA: EC P-256, valid for a day, made with the openssl CLI.
 */
export function makePki(): Pki {
  const dir = mkdtempSync(join(tmpdir(), "worq-pki-"));
  const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  const ca = (name: string) =>
    openssl("req", "-x509", ...ec, "-keyout", `${name}-key.pem`, "-out", `${name}.pem`, "-days", "1", "-subj", `/CN=${name}`);
  const leaf = (name: string, signer: string, usage: string) => {
    writeFileSync(join(dir, `${name}.ext`), `subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=${usage}\n`);
    openssl("req", ...ec, "-keyout", `${name}-key.pem`, "-out", `${name}.csr`, "-subj", `/CN=${name}`);
    openssl(
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      `${signer}.pem`,
      "-CAkey",
      `${signer}-key.pem`,
      "-CAcreateserial",
      "-out",
      `${name}.pem`,
      "-days",
      "1",
      "-extfile",
      `${name}.ext`,
    );
  };
  ca("worq-test-ca");
  ca("stranger-ca");
  leaf("server", "worq-test-ca", "serverAuth");
  leaf("client", "worq-test-ca", "clientAuth");
  leaf("stranger", "stranger-ca", "clientAuth");
  leaf("node", "worq-test-ca", "serverAuth,clientAuth");
  const path = (name: string) => join(dir, name);
  return {
    dir,
    ca: path("worq-test-ca.pem"),
    serverCert: path("server.pem"),
    serverKey: path("server-key.pem"),
    clientCert: path("client.pem"),
    clientKey: path("client-key.pem"),
    nodeCert: path("node.pem"),
    nodeKey: path("node-key.pem"),
    strangerCert: path("stranger.pem"),
    strangerKey: path("stranger-key.pem"),
    read: (file) => readFileSync(file),
  };
}
