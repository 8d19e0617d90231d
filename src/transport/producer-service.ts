import type { ServiceImpl } from "@connectrpc/connect";
import type { Engine } from "../engine/engine.js";
import { WorqError } from "../engine/errors.js";
import type { Logger } from "../log.js";
import { ProducerService } from "../../gen/ts/worq/v1/producer_service_pb.js";
import { stateOf, submitInputOf } from "./convert.js";
import { guarded } from "./handler-guard.js";

/** worq.v1.ProducerService: decode, call the engine, encode. */
export function createProducerService(engine: Engine, log: Logger): ServiceImpl<typeof ProducerService> {
  const notBuilt = (rpc: string) =>
    guarded(rpc, log, async () => {
      throw new WorqError("WORQ_UNIMPLEMENTED", `${rpc} is not built yet in this server version`);
    });
  return {
    submit: guarded("Submit", log, async (request) => {
      const [result] = await engine.submit([submitInputOf(request.job, "job")], () => "job");
      return { jid: result!.jid, state: stateOf(result!.state) };
    }),
    submitBatch: guarded("SubmitBatch", log, async (request) => {
      const inputs = request.jobs.map((job, i) => submitInputOf(job, `jobs[${i}]`));
      const results = await engine.submit(inputs, (i) => `jobs[${i}]`);
      return { jobs: results.map((result) => ({ jid: result.jid, state: stateOf(result.state) })) };
    }),
    run: notBuilt("ProducerService.Run"),
    getResult: notBuilt("ProducerService.GetResult"),
    cancel: notBuilt("ProducerService.Cancel"),
  };
}
