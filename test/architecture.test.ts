import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = join(import.meta.dirname, "../src");

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
    ["engine", /^(?:\.\.\/(?:transport|storage|cli)\/|@grpc\/|@connectrpc\/|@bufbuild\/|level$|node:(?:fs|net|http|http2|child_process))|gen\/ts/],
    ["storage", /^(?:\.\.\/\.\.\/(?:transport|cli)\/|@grpc\/|@connectrpc\/|@bufbuild\/)|gen\/ts/],
  ])("src/%s imports nothing it must not", (layer, forbidden) => {
    const offenders = files
      .filter((file) => relative(SRC, file).startsWith(`${layer}/`))
      .flatMap((file) => importsOf(file).filter((spec) => forbidden.test(spec)).map((spec) => `${relative(SRC, file)} -> ${spec}`));
    expect(offenders).toEqual([]);
  });

  it("no storage backend imports a sibling backend (storage/level, storage/postgres, storage/memory): shared parts live in src/storage/", () => {
    const backends = ["level", "postgres", "memory"];
    const offenders = files
      .filter((file) => backends.some((backend) => relative(SRC, file).startsWith(`storage/${backend}/`)))
      .flatMap((file) => {
        const own = relative(SRC, file).split("/")[1]!;
        const siblings = new RegExp(`^\\.\\./(?:${backends.filter((backend) => backend !== own).join("|")})/`);
        return importsOf(file).filter((spec) => siblings.test(spec)).map((spec) => `${relative(SRC, file)} -> ${spec}`);
      });
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
 * Engine rules: one small core (engine-core.ts) alone changes jobs and writes them; every other
 * engine file holds one concern and asks the core. The engine has no timers of its own.
 */
describe("engine rules", () => {
  const engineFiles = sourceFiles(join(SRC, "engine"));
  const name = (file: string) => relative(SRC, file);
  const offenders = (files: string[], pattern: RegExp) => files.filter((file) => pattern.test(readFileSync(file, "utf8"))).map(name);

  it("only engine-core.ts applies transition() and dependencyFailed() (state-machine.ts defines them)", () => {
    const others = sourceFiles(SRC).filter((file) => !/engine\/(?:engine-core|state-machine)\.ts$/.test(file));
    expect(offenders(others, /\b(?:transition|dependencyFailed)\(/)).toEqual([]);
    expect(offenders(engineFiles, /\btransition\(meta, event/)).toEqual(["engine/engine-core.ts"]); // the rule is not vacuous
  });

  it("only engine-core.ts writes to the store (store.commit)", () => {
    const others = engineFiles.filter((file) => !file.endsWith("engine-core.ts"));
    expect(offenders(others, /\.commit\(/)).toEqual([]);
  });

  it("the engine sets no timers of its own (setTimeout, setInterval): its owner drives tick() on the injected clock", () => {
    expect(offenders(engineFiles, /\b(?:setTimeout|setInterval|setImmediate)\(/)).toEqual([]);
  });

  it("no file in src/engine is over 400 lines", () => {
    const long = engineFiles.flatMap((file) => {
      const lines = readFileSync(file, "utf8").split("\n").length - 1;
      return lines > 400 ? [`${name(file)}: ${lines} lines`] : [];
    });
    expect(long).toEqual([]);
  });
});
