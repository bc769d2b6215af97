// What every browser test file shares: one server and one Chromium per file, a fresh
// browser context per page, signing in, and a test wrapper that leaves a screenshot of
// every open page when it fails. A file calls `consoleSuite(name, body)` and uses the
// helpers below inside it.

import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';

import { DESKTOP, SCREENSHOTS, Server, launchBrowser } from './harness.mjs';

export const TEST_TIMEOUT_MS = 120_000;
export const ACTION_TIMEOUT_MS = 15_000;
// How long a page may take to show a new bucket level without a reload.
export const LIVE_UPDATE_TIMEOUT_MS = 20_000;

/** The running server and browser of the current file (set by consoleSuite). */
export const env = { server: null, browser: null };
const contexts = new Set();

/**
 * A fresh browser context (own cookies) at `viewport` (desktop by default), with other
 * context `options` (such as `javaScriptEnabled: false`); closed after the test.
 */
export async function newPage(viewport = DESKTOP, options = {}) {
  const context = await env.browser.newContext({ ...options, viewport, baseURL: env.server.base });
  context.setDefaultTimeout(ACTION_TIMEOUT_MS);
  contexts.add(context);
  return context.newPage();
}

export const pathname = (page) => new URL(page.url()).pathname;

/** The response of the next top-level navigation that POSTs (a submitted form). */
export function nextFormPost(page) {
  return page.waitForResponse((r) => r.request().method() === 'POST' && r.request().isNavigationRequest());
}

/** Signs `user` in through /login; on success the browser ends on /apps. */
export async function signIn(page, user) {
  const resp = await page.goto('/login');
  assert.equal(resp.status(), 200, `GET /login answered ${resp.status()}`);
  const form = page.locator('#login-form');
  const username = form.getByLabel('Username', { exact: true });
  const password = form.getByLabel('Password', { exact: true });
  assert.equal(await username.getAttribute('name'), 'username');
  assert.equal(await password.getAttribute('name'), 'password');
  assert.equal(await password.getAttribute('type'), 'password');
  await username.fill(user.username);
  await password.fill(user.password);
  const [post] = await Promise.all([
    nextFormPost(page),
    form.getByRole('button', { name: 'Sign in', exact: true }).click(),
  ]);
  return post;
}

export async function signInOk(page, user) {
  const post = await signIn(page, user);
  assert.equal(post.status(), 303, `sign-in of ${user.username} answered ${post.status()}, not 303`);
  assert.equal(new URL(post.headers().location, env.server.base).pathname, '/apps');
  await page.waitForURL((u) => u.pathname === '/apps');
}

/** The policy form: the form whose submit button says "Create policy". */
export function policyForm(page) {
  return page.locator('form').filter({ has: page.getByRole('button', { name: 'Create policy', exact: true }) });
}

/** Each element of `locator` has a <label> (for= or wrapping). */
export async function assertLabelled(locator, what) {
  const labels = await locator.evaluate((el) => (el.labels ? el.labels.length : 0));
  assert.ok(labels > 0, `${what} has no <label>`);
}

export const optionValues = (select) => select.locator('option').evaluateAll((os) => os.map((o) => o.value));

// axe-core's script, from node_modules (a dev dependency): injected into each page checked.
const AXE_SCRIPT = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
let axeSource = null;

/**
 * Runs axe-core on the page as it is now and fails on any violation, naming each rule,
 * its impact and the elements. The script is evaluated through the DevTools protocol,
 * which the pages' Content-Security-Policy (scripts from the site only) does not block.
 */
export async function assertAccessible(page, what = pathname(page)) {
  axeSource ??= await readFile(AXE_SCRIPT, 'utf8');
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) {
    await page.evaluate(axeSource);
  }
  const violations = await page.evaluate(async () => {
    // target-size (WCAG 2.2) is off by default in axe-core: on, so touch targets stay 24 px.
    const result = await window.axe.run(document, { resultTypes: ['violations'], rules: { 'target-size': { enabled: true } } });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.slice(0, 5).map((n) => `${n.target.join(' ')}: ${n.failureSummary}`),
    }));
  });
  const report = violations
    .map((v) => `- ${v.id} (${v.impact}): ${v.help}\n    ${v.nodes.join('\n    ')}`)
    .join('\n');
  assert.equal(violations.length, 0, `axe-core found violations on ${what}:\n${report}`);
}

const slug = (s) => s.replace(/[^a-z0-9]+/gi, '-').replace(/^-|-$/g, '');

/**
 * A test that, when it fails, also reports where each open page was, with a screenshot
 * of it in e2e/screenshots/FAILED-<test>-<n>.png.
 */
export function uiTest(name, fn) {
  test(name, { timeout: TEST_TIMEOUT_MS }, async (t) => {
    try {
      await fn(t);
    } catch (e) {
      const where = [];
      let n = 0;
      for (const c of contexts) {
        for (const p of c.pages()) {
          const file = path.join(SCREENSHOTS, `FAILED-${slug(name)}-${++n}.png`);
          await mkdir(SCREENSHOTS, { recursive: true });
          await p.screenshot({ path: file, fullPage: true }).catch(() => {});
          const text = await p.locator('body').innerText({ timeout: 1000 }).catch(() => '');
          where.push(`page ${n}: ${p.url()} (${file})\n  ${text.replace(/\s+/g, ' ').slice(0, 300)}`);
        }
      }
      if (where.length) t.diagnostic(`open pages when it failed:\n${where.join('\n')}`);
      throw e;
    }
  });
}

/**
 * A file's tests: a server of their own (seeded as harness.mjs says) and Chromium,
 * started before and stopped after; `body` declares the tests with uiTest.
 */
export function consoleSuite(name, body) {
  describe(name, { timeout: 20 * TEST_TIMEOUT_MS }, () => {
    before(async () => {
      // (scripts/e2e.sh removes the failure screenshots of an earlier run.)
      // Assigned before start(), so that after() stops a server whose setup failed.
      env.server = new Server();
      await env.server.start();
      env.browser = await launchBrowser();
    });

    afterEach(async () => {
      for (const c of contexts) await c.close().catch(() => {});
      contexts.clear();
    });

    after(async () => {
      await env.browser?.close();
      const status = await env.server?.stop();
      // SIGTERM is a graceful stop: the process exits 0.
      if (status) assert.equal(status.code, 0, `server exited with ${JSON.stringify(status)}\n${env.server.logTail()}`);
    });

    body();
  });
}

/** The controls (and status badges) of the page that are cut off: by the viewport or by an ancestor box. */
export function clippedControls(page) {
  return page.evaluate(() => {
    const out = [];
    for (const el of document.querySelectorAll('main a, main button, main select, main input:not([type=hidden]), main textarea, main .badge')) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) { continue; }
      const name = `${el.tagName.toLowerCase()} "${(el.textContent || el.getAttribute('aria-label') || el.name || '').trim().slice(0, 40)}"`;
      if (r.right > window.innerWidth + 0.5 || r.left < -0.5) { out.push(`${name} past the screen`); continue; }
      for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
        if (getComputedStyle(p).overflowX === 'visible') { continue; }
        const box = p.getBoundingClientRect();
        if (r.right > box.right + 0.5 || r.left < box.left - 0.5) { out.push(`${name} cut by ${p.className || p.tagName}`); }
        break;
      }
    }
    return out;
  });
}
