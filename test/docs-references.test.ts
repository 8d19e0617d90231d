/**
 * Comments, test titles and docs may only point at what a reader of this repository has: a
 * rule said in place, or a page under docs/. Design notes kept outside the repository
 * (numbered source documents, a product spec, research notes) are not shipped, so a
 * reference to one is a dead end for every user and contributor.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..");
const SCANNED = [
  "src",
  "proto",
  "packages/client/src",
  "test",
  "bench",
  "scripts",
  "examples",
  "clients",
  "docs",
  "README.md",
  "CONTRIBUTING.md",
];
const SKIPPED_DIRS = new Set(["node_modules", "dist", "gen", ".venv", "__pycache__", "results"]);
const TEXT_FILE = /\.(ts|mts|mjs|js|py|go|proto|md|sh|html|css)$/;

/** Each pattern names what it catches, so a failure says which kind of reference slipped in. */
const DEAD_REFERENCES: [string, RegExp][] = [
  ['a numbered source document ("seed 004", "seeds 000")', /\bseeds? 00\d\b/i],
  ['a section sign citing an outside document ("004 §6", "SPEC §2")', /(\b00\d|\bSPEC) §\s?\d/],
  ['the product spec ("SPEC.md")', /\bSPEC\.md\b/],
  ['research notes ("research/…md")', /\bresearch\/[\w.-]+\.md\b/],
  ['the shared design folder ("../shared")', /\.\.\/shared\//],
];

function* textFiles(path: string): Generator<string> {
  const stats = statSync(path, { throwIfNoEntry: false });
  if (!stats) return;
  if (stats.isFile()) {
    if (TEXT_FILE.test(path)) yield path;
    return;
  }
  for (const entry of readdirSync(path)) {
    if (SKIPPED_DIRS.has(entry)) continue;
    yield* textFiles(join(path, entry));
  }
}

describe("references a reader can follow", () => {
  const self = relative(ROOT, import.meta.filename);
  const files = SCANNED.flatMap((entry) => [...textFiles(join(ROOT, entry))]).filter((file) => relative(ROOT, file) !== self);

  it("scans the source, protos, tests and docs", () => {
    expect(files.length).toBeGreaterThan(300);
  });

  for (const [what, pattern] of DEAD_REFERENCES) {
    it(`no file cites ${what}`, () => {
      const hits = files.flatMap((file) =>
        readFileSync(file, "utf8")
          .split("\n")
          .flatMap((line, index) => (pattern.test(line) ? [`${relative(ROOT, file)}:${index + 1}: ${line.trim()}`] : [])),
      );
      expect(hits).toEqual([]);
    });
  }
});
