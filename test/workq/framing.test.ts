import { describe, expect, it } from "vitest";
import { MAX_BLOCK_BYTES, WorkqParser, type Frame } from "../../src/workq/framing.js";

const bytes = (text: string) => Buffer.from(text, "latin1");

/** The frames of `input` fed to one parser in the given pieces. */
function framesOf(pieces: string[]): Frame[] {
  const parser = new WorkqParser();
  return pieces.flatMap((piece) => parser.push(bytes(piece)));
}

const summary = (frames: Frame[]) =>
  frames.map((frame) =>
    frame.kind === "error"
      ? `error:${frame.message}:${frame.close}`
      : `${frame.command.name}(${frame.command.args.join(",")})${[...frame.command.flags].map(([k, v]) => ` -${k}=${v}`).join("")}${
          frame.command.block ? `[${frame.command.block.toString("latin1")}]` : ""
        }`,
  );

describe("Workq framing", () => {
  const stream =
    "add 3f0b2c1a-8d4e-4f6a-9b2c-1d2e3f4a5b6c ping 1000 60000 6 -priority=-5\r\np\r\ni\r\n\r\n" +
    "lease ping other 1000\r\n" +
    "complete 3f0b2c1a-8d4e-4f6a-9b2c-1d2e3f4a5b6c 0\r\n\r\n" +
    "inspect  server\r\n";
  const expected = [
    "add(3f0b2c1a-8d4e-4f6a-9b2c-1d2e3f4a5b6c,ping,1000,60000,6) -priority=-5[p\r\ni\r\n]",
    "lease(ping,other,1000)",
    "complete(3f0b2c1a-8d4e-4f6a-9b2c-1d2e3f4a5b6c,0)[]",
    "inspect(server)",
  ];

  it("parses pipelined commands, data blocks holding CRLF, empty blocks and negative flag values", () => {
    expect(summary(framesOf([stream]))).toEqual(expected);
  });

  it("gives the same commands however the bytes are split across reads", () => {
    for (let cut = 1; cut < stream.length; cut++) {
      expect(summary(framesOf([stream.slice(0, cut), stream.slice(cut)]))).toEqual(expected);
    }
    expect(summary(framesOf([...stream]))).toEqual(expected);
  });

  it("holds a half-sent command until the rest arrives, and says so", () => {
    const parser = new WorkqParser();
    expect(parser.push(bytes("add 3f0b2c1a-8d4e-4f6a-9b2c-1d2e3f4a5b6c ping 1000 60000 4\r\npo"))).toEqual([]);
    expect(parser.partial).toBe(true);
    expect(parser.push(bytes("ng\r\n"))).toHaveLength(1);
    expect(parser.partial).toBe(false);
  });

  it("flags: -key=value anywhere after the name; empty or repeated ones are marked bad; -5 is positional", () => {
    const [frame] = framesOf(["lease -x=1 ping -5\r\n"]);
    expect(frame).toMatchObject({ kind: "command", command: { name: "lease", args: ["ping", "-5"], badFlags: false } });
    for (const line of ["lease ping -=1 10\r\n", "lease ping -a= 10\r\n", "lease ping -a=1 -a=2 10\r\n"]) {
      expect(framesOf([line])[0]).toMatchObject({ kind: "command", command: { badFlags: true } });
    }
  });

  it("an unreadable block size, a wrong argument count before a block, or a block not ended by CRLF closes the stream", () => {
    const id = "3f0b2c1a-8d4e-4f6a-9b2c-1d2e3f4a5b6c";
    expect(summary(framesOf([`add ${id} ping 1000 60000 x\r\nlease a 1\r\n`]))).toEqual(["error:Invalid payload size:true"]);
    expect(summary(framesOf([`add ${id} ping 1000 60000 ${MAX_BLOCK_BYTES + 1}\r\n`]))).toEqual(["error:Invalid payload size:true"]);
    expect(summary(framesOf([`fail ${id} -1\r\n`]))).toEqual(["error:Invalid result size:true"]);
    expect(summary(framesOf([`add ${id} ping 1000 4\r\nping\r\n`]))).toEqual(["error:Invalid command args:true"]);
    expect(summary(framesOf([`complete ${id} 2\r\nabcd\r\n`]))).toEqual(["error:Invalid payload size:true"]);
  });

  it("lines end in CRLF and are at most 10,000 bytes", () => {
    expect(summary(framesOf(["inspect server\n"]))).toEqual(["error:Commands end in CRLF:true"]);
    expect(summary(framesOf(["x".repeat(10_001)]))).toEqual(["error:Command line too long:true"]);
    expect(summary(framesOf(["x".repeat(10_000)]))).toEqual([]);
    expect(summary(framesOf(["\r\n", " inspect server\r\n"]))).toEqual(["()", "(inspect,server)"]);
  });

  it("a full 1 MiB block is accepted", () => {
    const parser = new WorkqParser();
    const block = Buffer.alloc(MAX_BLOCK_BYTES, 0x61);
    const frames = [
      ...parser.push(bytes(`complete 3f0b2c1a-8d4e-4f6a-9b2c-1d2e3f4a5b6c ${MAX_BLOCK_BYTES}\r\n`)),
      ...parser.push(block),
      ...parser.push(bytes("\r\n")),
    ];
    expect(frames).toHaveLength(1);
    expect(frames[0]!.kind === "command" && frames[0]!.command.block!.equals(block)).toBe(true);
  });
});
