// The console's layout measured in headless Chromium (see harness.mjs): at 1280 px no
// table is wider than its container and a policy's row is at most 60 px tall; at 390 px
// every link, button and field can be seen whole (none cut off by the screen's edge or
// by a box that hides what overflows it).

import assert from 'node:assert/strict';

import { APP, DESKTOP, PHONE, USERS, pollUntil, screenshots } from './harness.mjs';
import { LIVE_UPDATE_TIMEOUT_MS, clippedControls, consoleSuite, env, newPage, signInOk, uiTest } from './ui.mjs';

/** Policies of every kind a row can show, with traffic, and keys of every state the keys table can. */
async function seed() {
  const kinds = [{}, { mode: 'shadow' }, { failure_mode: 'open', scope: 'per_key' }, { mode: 'block' }, { enabled: false }];
  for (const [i, fields] of kinds.entries()) {
    await env.server.api('POST', '/api/v1/policies', { name: `layout.policy-${i}`, owner_app: APP.slug, rate: 0.001, max_permits: 5, ...fields }, 201);
  }
  // Traffic, so that rows carry their longest status: denials, would-be denials, per key.
  for (let i = 0; i < 8; i++) {
    await env.server.acquire('layout.policy-0');
    await env.server.acquire('layout.policy-1');
    await env.server.acquire('layout.policy-2', 1, `caller-${i % 3}`);
  }
  await env.server.api('POST', `/api/v1/apps/${APP.slug}/keys`, { label: 'checkout-service-production-eu-west-1', expires_at: '2031-01-31T18:00:00Z' }, 201);
  const rotated = await env.server.api('POST', `/api/v1/apps/${APP.slug}/keys`, { label: 'billing-batch' }, 201);
  await env.server.api('POST', `/api/v1/apps/${APP.slug}/keys/${rotated.id}/rotate`, {}, 201);
}

consoleSuite('layout', () => {
  uiTest('owner at 1280 px: every table fits its box and a policy row is at most 60 px tall', async () => {
    await seed();
    const page = await newPage(DESKTOP);
    await signInOk(page, USERS.olivia);
    // The counts reach Redis with the server's next flush (every 2 s).
    await pollUntil('the rows to show their traffic', async () => {
      await page.goto(`/apps/${APP.slug}`);
      return (await page.locator('tr[data-policy="layout.policy-1"]').textContent()).includes('would have been denied');
    }, { timeoutMs: LIVE_UPDATE_TIMEOUT_MS, intervalMs: 500 });
    const overflowing = await page.evaluate(() =>
      [...document.querySelectorAll('.table-wrap')]
        .filter((w) => w.scrollWidth > w.clientWidth + 1)
        .map((w) => `${w.querySelector('caption')?.textContent.trim()}: ${w.scrollWidth - w.clientWidth} px too wide`));
    assert.deepEqual(overflowing, []);
    const tall = await page.evaluate(() =>
      [...document.querySelectorAll('#policies tr[data-policy]')]
        .map((r) => [r.getAttribute('data-policy'), Math.round(r.getBoundingClientRect().height)])
        .filter(([, h]) => h > 60));
    assert.deepEqual(tall, []);
    assert.deepEqual(await clippedControls(page), []);
    await screenshots(page, 'layout-app');
  });

  uiTest('owner at 390 px: no link, button, field or badge is cut off', async () => {
    const page = await newPage(PHONE);
    await signInOk(page, USERS.olivia);
    for (const path of [`/apps/${APP.slug}`, '/apps', '/policies/layout.policy-0', '/audit']) {
      await page.goto(path);
      assert.deepEqual(await clippedControls(page), [], path);
    }
  });
});
