import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { VERSION } from "ratekeeper-client";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

test("VERSION is the package's version", () => {
  const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as {
    version: string;
  };
  assert.equal(VERSION, pkg.version);
});

test("the library imports no Node built-in, so it runs on edge runtimes", () => {
  const dist = path.join(root, "dist");
  for (const file of readdirSync(dist).filter((f) => f.endsWith(".js"))) {
    const text = readFileSync(path.join(dist, file), "utf8");
    for (const m of text.matchAll(/(?:from\s*|import\s*\(\s*)["']([^"']+)["']/g)) {
      assert.match(m[1] ?? "", /^\.\//, `${file} imports ${m[1]}`);
    }
    assert.doesNotMatch(text, /\brequire\(|\bprocess\.|\bBuffer\b/, file);
  }
});
