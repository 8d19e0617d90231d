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
    // Spans would go to a path after the query or fragment, and fetch refuses credentials in a URL.
    for (const endpoint of [
      "http://u:p@collector:4318",
      "http://u@collector:4318",
      "http://collector:4318?k=v",
      "http://collector:4318/#f",
      "http://c:4318?",
    ]) {
      expect(() => parse(["--otlp-endpoint", endpoint]), endpoint).toThrow(
        /^--otlp-endpoint: .* must have no user, password, query or fragment/,
      );
    }
  });
});
