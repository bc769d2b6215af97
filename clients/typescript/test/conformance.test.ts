// The language-neutral conformance scenarios (clients/conformance/scenarios/*.json), one test
// per file, against the server of the fixture named by RK_CONFORMANCE_FIXTURE; skipped when
// it is not set. RK_CONFORMANCE_SCENARIOS overrides the scenarios' directory.
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { Client, RateLimited, RatekeeperError } from "ratekeeper-client";

import { repoRoot } from "./real-server.js";

interface Fixture {
  url: string;
  prefix: string;
  keys: { caller: string; stranger: string };
  unreachable_url: string;
}

type Expect = Record<string, unknown>;

interface Item {
  resource: string;
  key?: string;
  permits?: number;
}

interface Step {
  op: string;
  resource?: string;
  key?: string;
  permits?: number;
  items?: Item[];
  lease_id_from?: number;
  as?: "caller" | "stranger" | "bad_key";
  server?: "real" | "unreachable";
  fail_open?: boolean;
  timeout_ms?: number;
  wait_ms?: number;
  expect?: Expect;
}

interface Scenario {
  description: string;
  steps: Step[];
}

const BAD_KEY = "rk_live_madeupmadeupmadeupmadeupmadeup0";

const scenarioDir =
  process.env.RK_CONFORMANCE_SCENARIOS ??
  path.join(repoRoot(), "clients", "conformance", "scenarios");
const fixturePath = process.env.RK_CONFORMANCE_FIXTURE;
const files = existsSync(scenarioDir)
  ? readdirSync(scenarioDir)
      .filter((f) => f.endsWith(".json"))
      .sort()
  : [];

if (fixturePath && files.length === 0) {
  test("conformance scenarios", () => assert.fail(`no scenario in ${scenarioDir}`));
}

for (const file of files) {
  const stem = file.replace(/\.json$/, "");
  test(
    stem,
    { skip: fixturePath ? false : "RK_CONFORMANCE_FIXTURE is not set", timeout: 120_000 },
    async () => {
      const fixture = JSON.parse(readFileSync(fixturePath ?? "", "utf8")) as Fixture;
      const scenario = JSON.parse(readFileSync(path.join(scenarioDir, file), "utf8")) as Scenario;
      const problems = await runScenario(scenario, fixture);
      assert.deepEqual(problems, [], `${stem}: ${scenario.description}`);
    },
  );
}

async function runScenario(scenario: Scenario, fixture: Fixture): Promise<string[]> {
  const keys = { caller: fixture.keys.caller, stranger: fixture.keys.stranger, bad_key: BAD_KEY };
  const urls = { real: fixture.url, unreachable: fixture.unreachable_url };
  // A fresh client per scenario (and per role and server), so no denial leaks between them.
  const clients = new Map<string, Client>();
  const clientFor = (step: Step): Client => {
    const role = step.as ?? "caller";
    const server = step.server ?? "real";
    const id = `${role}/${server}`;
    let client = clients.get(id);
    if (client === undefined) {
      client = new Client({ url: urls[server], apiKey: keys[role], timeoutMs: 5_000 });
      clients.set(id, client);
    }
    return client;
  };
  const outcomes: unknown[] = [];
  const problems: string[] = [];
  for (const [index, step] of scenario.steps.entries()) {
    const expect = step.expect ?? {};
    const label = `step ${index} (${step.op} ${step.resource ?? ""})`;
    const started = performance.now();
    let got: unknown;
    try {
      got = await runStep(step, fixture.prefix, clientFor(step), outcomes);
    } catch (err) {
      outcomes.push(err);
      if (!(err instanceof RatekeeperError)) throw err;
      if (!("error" in expect)) {
        problems.push(`${label}: unexpected ${err.name} ${err.status}: ${err.message}`);
        continue;
      }
      checkValue(`${label}.error`, expect.error, err.name, problems);
      if ("error_field" in expect) {
        checkValue(
          `${label}.error_field`,
          expect.error_field,
          err.errors[0]?.field ?? err.field ?? null,
          problems,
        );
      }
      continue;
    }
    const elapsed = performance.now() - started;
    outcomes.push(got);
    if ("error" in expect) {
      problems.push(`${label}: want ${String(expect.error)}, got ${JSON.stringify(got)}`);
      continue;
    }
    checkDecision(label, expect, got as Record<string, unknown>, problems);
    const allowed = (got as { allowed?: unknown }).allowed;
    if (step.wait_ms !== undefined && allowed !== true && elapsed > step.wait_ms) {
      problems.push(`${label}: a wait of ${step.wait_ms} ms took ${Math.round(elapsed)} ms`);
    }
  }
  return problems;
}

async function runStep(
  step: Step,
  prefix: string,
  client: Client,
  outcomes: unknown[],
): Promise<unknown> {
  const resource = `${prefix}.${step.resource ?? ""}`;
  const common = {
    ...(step.key === undefined ? {} : { key: step.key }),
    ...(step.fail_open === undefined ? {} : { failOpen: step.fail_open }),
    ...(step.timeout_ms === undefined ? {} : { timeoutMs: step.timeout_ms }),
  };
  const wait = step.wait_ms === undefined ? {} : { waitMs: step.wait_ms };
  const permits = step.permits === undefined ? {} : { permits: step.permits };
  switch (step.op) {
    case "acquire":
      return client.acquire(resource, { ...common, ...wait, ...permits });
    case "check":
      return client.check(resource, { ...common, ...wait });
    case "acquire_all":
      return client.acquireAll(
        (step.items ?? []).map((item) => ({ ...item, resource: `${prefix}.${item.resource}` })),
        common,
      );
    case "refund":
      return client.refund(resource, step.permits ?? 1, common);
    case "release": {
      const source = outcomes[step.lease_id_from ?? -1] as { leaseId?: unknown } | undefined;
      const leaseId = source?.leaseId;
      if (typeof leaseId !== "string") {
        throw new Error(`step ${String(step.lease_id_from)} has no lease id to release`);
      }
      return client.release(resource, leaseId, common);
    }
    case "lease":
      try {
        return await client.lease(
          resource,
          { ...common, ...wait, ...permits },
          (lease) => lease.decision,
        );
      } catch (err) {
        if (err instanceof RateLimited) return err.decision;
        throw err;
      }
    default:
      throw new Error(`unknown op ${step.op}`);
  }
}

function camel(field: string): string {
  return field.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

function checkDecision(
  label: string,
  expect: Expect,
  got: Record<string, unknown>,
  problems: string[],
): void {
  for (const [field, want] of Object.entries(expect)) {
    if (field === "error" || field === "error_field") continue;
    if (field === "results") {
      const results = got.results;
      const wants = want as Expect[];
      if (!Array.isArray(results) || results.length !== wants.length) {
        problems.push(
          `${label}.results: want ${wants.length} results, got ${JSON.stringify(results)}`,
        );
        continue;
      }
      wants.forEach((w, i) =>
        checkDecision(`${label}.results[${i}]`, w, results[i] as Record<string, unknown>, problems),
      );
    } else if (field === "headers") {
      const headers = new Map(
        Object.entries((got.headers ?? {}) as Record<string, string>).map(([k, v]) => [
          k.toLowerCase(),
          v,
        ]),
      );
      for (const [name, value] of Object.entries(want as Record<string, string>)) {
        const have = headers.get(name.toLowerCase());
        if (value === "present") {
          if (have === undefined) problems.push(`${label}: header ${name} absent`);
        } else if (value === "absent") {
          if (have !== undefined) problems.push(`${label}: header ${name} present: ${have}`);
        } else if (have !== value) {
          problems.push(
            `${label}: header ${name}: want ${JSON.stringify(value)}, got ${JSON.stringify(have)}`,
          );
        }
      }
    } else if (field === "has_lease_id") {
      checkValue(
        `${label}.has_lease_id`,
        want,
        typeof got.leaseId === "string" && got.leaseId !== "",
        problems,
      );
    } else {
      checkValue(`${label}.${field}`, want, got[camel(field)] ?? null, problems);
    }
  }
}

function checkValue(label: string, want: unknown, got: unknown, problems: string[]): void {
  if (typeof want === "object" && want !== null) {
    const range = want as { min?: number; max?: number };
    if (typeof got !== "number") {
      problems.push(`${label}: want ${JSON.stringify(want)}, got ${JSON.stringify(got)}`);
      return;
    }
    if (range.min !== undefined && got < range.min)
      problems.push(`${label}: want at least ${range.min}, got ${got}`);
    if (range.max !== undefined && got > range.max)
      problems.push(`${label}: want at most ${range.max}, got ${got}`);
  } else if (want !== got) {
    problems.push(`${label}: want ${JSON.stringify(want)}, got ${JSON.stringify(got)}`);
  }
}
