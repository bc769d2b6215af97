// Acquire one permit of `orders.create` and say what the server decided.
//   RATEKEEPER_URL=http://127.0.0.1:8080 RATEKEEPER_API_KEY=rk_live_... node quickstart.mjs
import { Client } from "ratekeeper-client";

const client = new Client({
  url: process.env.RATEKEEPER_URL ?? "http://127.0.0.1:8080",
  apiKey: process.env.RATEKEEPER_API_KEY ?? "",
  timeoutMs: 1000,
});

const decision = await client.acquire("orders.create");
if (decision.allowed) {
  console.log(`allowed: ${decision.remaining} of ${decision.limit} left`);
} else {
  console.log(`not allowed: retry in ${decision.retryAfterMs} ms (degraded: ${decision.degraded})`);
}
