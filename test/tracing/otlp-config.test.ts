/** `--otlp-endpoint` and OTEL_EXPORTER_OTLP_ENDPOINT: parsed, checked, off when unset (docs/tracing.md). */
import { describe, expect, it } from "vitest";
import { parseServeArgs, type ServerConfig } from "../../src/config.js";

const parse = (argv: string[], env: NodeJS.ProcessEnv = {}) => parseServeArgs(argv, env) as ServerConfig;

describe("the OTLP endpoint setting", () => {
  it("is unset by default: no tracing", () => {
    expect(parse([]).otlpEndpoint).toBeUndefined();
    expect(parse([], { OTEL_EXPORTER_OTLP_ENDPOINT: "" }).otlpEndpoint).toBeUndefined();
  });

  it("comes from --otlp-endpoint, else OTEL_EXPORTER_OTLP_ENDPOINT", () => {
    expect(parse(["--otlp-endpoint", "http://127.0.0.1:4318"]).otlpEndpoint).toBe("http://127.0.0.1:4318");
    expect(parse([], { OTEL_EXPORTER_OTLP_ENDPOINT: "https://collector.example.com:4318" }).otlpEndpoint).toBe(
      "https://collector.example.com:4318",
    );
    expect(parse(["--otlp-endpoint", "http://a:4318"], { OTEL_EXPORTER_OTLP_ENDPOINT: "http://b:4318" }).otlpEndpoint).toBe(
      "http://a:4318",
    );
  });

  it("refuses what is not an http(s) URL, naming the flag", () => {
    expect(() => parse(["--otlp-endpoint", "collector:4318"])).toThrow(/--otlp-endpoint/);
    expect(() => parse(["--otlp-endpoint", "grpc://collector:4317"])).toThrow(/--otlp-endpoint.*http or https/);
  });
});
