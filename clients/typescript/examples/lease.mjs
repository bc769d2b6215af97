// Hold a permit of a `concurrency` policy while a job runs; give it back when it is done.
//   RATEKEEPER_URL=... RATEKEEPER_API_KEY=... node lease.mjs
import { Client, RateLimited } from "ratekeeper-client";

const client = new Client({
  url: process.env.RATEKEEPER_URL ?? "http://127.0.0.1:8080",
  apiKey: process.env.RATEKEEPER_API_KEY ?? "",
});

try {
  const rows = await client.lease("reports.export", async (lease) => {
    console.log(`lease ${lease.decision.leaseId ?? "(none: degraded)"} held`);
    await new Promise((resolve) => setTimeout(resolve, 500)); // the export
    return 1234;
  });
  console.log(`exported ${rows} rows; the permit is free again`);
} catch (err) {
  if (err instanceof RateLimited) {
    console.log(`too many exports running; retry in ${err.decision.retryAfterMs} ms`);
  } else {
    throw err;
  }
}
