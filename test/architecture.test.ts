import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = join(import.meta.dirname, "../src");
const CLIENT = join(import.meta.dirname, "../packages/client");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith(".ts") ? [join(dir, entry.name)] : [],
  );
}

function importsOf(file: string): string[] {
  return [...readFileSync(file, "utf8").matchAll(/^\s*(?:import|export)\b(?:[^'"]*?\bfrom\s+|\s+)["']([^"']+)["']/gm)].map((m) => m[1]!);
}

/**
 * Layer rules (CONTRIBUTING.md): imports flow transport -> engine <- storage. The engine is
 * pure domain logic: no gRPC, no protobuf, no storage backend, no file or network I/O.
 */
describe("layer rules", () => {
  const files = sourceFiles(SRC);

  it.each([
    // The client package's wire helpers are plain byte writers; its generated code and the rest are not.
    ["engine", /^(?:\.\.\/(?:transport|storage|cli)\/|@grpc\/|@connectrpc\/|@bufbuild\/|level$|node:(?:fs|net|http|http2|child_process)|@worq\/client(?!\/wire\/))/],
    ["storage", /^(?:\.\.\/\.\.\/(?:transport|cli)\/|@grpc\/|@connectrpc\/|@bufbuild\/|@worq\/client\/gen\/)/],
  ])("src/%s imports nothing it must not", (layer, forbidden) => {
    const offenders = files
      .filter((file) => relative(SRC, file).startsWith(`${layer}/`))
      .flatMap((file) => importsOf(file).filter((spec) => forbidden.test(spec)).map((spec) => `${relative(SRC, file)} -> ${spec}`));
    expect(offenders).toEqual([]);
  });

  it("keys of the LevelDB keyspace are built only in keys.ts", () => {
    const offenders = files
      .filter((file) => !file.endsWith("keys.ts"))
      .filter((file) => /["'`](?:j|b|r|l|m)\/["'`$]/.test(readFileSync(file, "utf8")));
    expect(offenders.map((file) => relative(SRC, file))).toEqual([]);
  });
});

/**
 * The client package (@worq/client) is what a producer or worker installs: it must build and
 * run without the server, so it reaches nothing outside its own directory and declares none
 * of the server's libraries.
 */
describe("client package rules", () => {
  const files = sourceFiles(join(CLIENT, "src"));
  const manifest = JSON.parse(readFileSync(join(CLIENT, "package.json"), "utf8")) as { dependencies: Record<string, string> };

  it("packages/client imports nothing of the server: only its own files, node: built-ins and its declared dependencies", () => {
    expect(files.length).toBeGreaterThan(10);
    const offenders = files.flatMap((file) =>
      importsOf(file)
        .filter((spec) => {
          if (spec.startsWith(".")) return !resolve(dirname(file), spec).startsWith(join(CLIENT, "src") + "/");
          if (spec.startsWith("node:")) return false;
          const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]!;
          return !(name in manifest.dependencies);
        })
        .map((spec) => `${relative(CLIENT, file)} -> ${spec}`),
    );
    expect(offenders).toEqual([]);
  });

  it("packages/client depends on no server library (storage, gRPC server, metrics, logging, CLI)", () => {
    const serverOnly = ["level", "classic-level", "pg", "prom-client", "pino", "commander", "@grpc/grpc-js", "@grpc/reflection", "grpc-health-check"];
    expect(Object.keys(manifest.dependencies).filter((name) => serverOnly.includes(name))).toEqual([]);
    expect(Object.keys(manifest.dependencies).sort()).toEqual(["@bufbuild/protobuf", "@connectrpc/connect", "@connectrpc/connect-node"]);
  });
});
