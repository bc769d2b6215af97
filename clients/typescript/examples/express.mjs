// An Express app whose /orders route is limited per user by ratekeeper.
//   npm install express ratekeeper-client
//   RATEKEEPER_URL=http://127.0.0.1:8080 RATEKEEPER_API_KEY=rk_live_... node express.mjs
// then: curl -i -X POST http://127.0.0.1:3000/orders (the third within 10 s is a 429)
import express from "express";
import { Client } from "ratekeeper-client";
import { rateLimit } from "ratekeeper-client/express";

const client = new Client({
  url: process.env.RATEKEEPER_URL ?? "http://127.0.0.1:8080",
  apiKey: process.env.RATEKEEPER_API_KEY ?? "",
  timeoutMs: 200,
  failOpen: true, // keep serving if ratekeeper cannot be reached
});

const app = express();
app.post(
  "/orders",
  rateLimit({
    client,
    resource: "orders.create",
    // orders.create is a global policy: one bucket for all. For a per_key policy, give
    // each caller its own bucket with `key: (req) => req.get("x-user") ?? req.ip`.
  }),
  (_req, res) => {
    res.status(201).json({ created: true });
  },
);

const port = Number(process.env.PORT ?? 3000);
app.listen(port, "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${port}`);
});
