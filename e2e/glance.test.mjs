// At a glance, as each role: one application with a shadow policy that would deny, a
// fail-closed policy that refused with 503 (on another instance, cut off from Redis), and
// another team's limit that denies it. Admin, owner and viewer see all three statuses on the
// first screen of the application's page at 1280 px (the rows) and at 390 px (the line that
// counts them, and the other team's limit), with screenshots of each, and
// the policies on the list of applications; a user of no application sees none of it.

import assert from 'node:assert/strict';

import { refusedOnAnotherInstance } from './cuttable_proxy.mjs';
import { APP, DESKTOP, PHONE, USERS, pollUntil, screenshots } from './harness.mjs';
import { assertAccessible, clippedControls, consoleSuite, env, newPage, signInOk, uiTest } from './ui.mjs';

const SHADOW = 'glance.shadow';
const CLOSED = 'glance.closed';
const OTHERS = 'billing.glance';
// The other instance reconnects with a backoff of its own, then flushes every 2 s.
const COUNTED_TIMEOUT_MS = 60_000;

/** The top of `locator`'s box is on the page's first screen (no scrolling needed). */
async function onFirstScreen(page, locator) {
  const box = await locator.boundingBox();
  return box !== null && box.y >= 0 && box.y + box.height <= page.viewportSize().height;
}

/** A shadow policy's would-be denials, and a denying limit of billing on shop's key. */
async function seedShadowAndOthers() {
  const api = env.server.api.bind(env.server);
  await api('POST', '/api/v1/policies', { name: SHADOW, owner_app: APP.slug, rate: 0.001, max_permits: 1, mode: 'shadow' }, 201);
  await api('POST', '/api/v1/apps', { slug: 'billing', name: 'Billing', description: '' }, 201);
  await api('POST', '/api/v1/policies', { name: OTHERS, owner_app: 'billing', rate: 0.001, max_permits: 1, allowed_apps: ['billing', APP.slug] }, 201);
  for (const expected of [200, 429, 429]) assert.equal((await env.server.acquire(OTHERS)).status, expected);
  for (let i = 0; i < 3; i++) assert.equal((await env.server.acquire(SHADOW)).status, 200, 'shadow mode denies no one');
}

/** A fail-closed policy that refused 3 acquires with 503 on an instance cut off from Redis. */
async function seedRefusals(redis) {
  await env.server.api('POST', '/api/v1/policies', { name: CLOSED, owner_app: APP.slug, rate: 100, max_permits: 100, failure_mode: 'closed' }, 201);
  await refusedOnAnotherInstance(env.server, redis, CLOSED, 3, async () => {
    const page = await newPage(DESKTOP);
    await signInOk(page, USERS.root);
    await pollUntil('the 503s to reach the console', async () => {
      await page.goto(`/policies/${CLOSED}`);
      return /3 refused with 503/.test(await page.locator('.usage-chart').first().textContent());
    }, { timeoutMs: COUNTED_TIMEOUT_MS, intervalMs: 1000 });
  });
}

consoleSuite('glance', () => {
  uiTest('admin, owner and viewer see a shadow, a 503-ing and another team\'s limit on the first screen; no one else does', async (t) => {
    await seedShadowAndOthers();
    const redis = env.server.redisAddress();
    const refusals = !redis.cluster;
    if (refusals) await seedRefusals(redis);
    else t.diagnostic('a Redis cluster: no single address to put a proxy in front of; no 503s');

    const expected = [
      [`#policies tr[data-policy="${SHADOW}"] [data-col="recent-badge"]`, /^Would deny \d+%$/],
      [`#held-by-others`, new RegExp(`${OTHERS.replace('.', '\\.')} of billing Denying \\d+%`)],
    ];
    if (refusals) expected.push([`#policies tr[data-policy="${CLOSED}"] [data-col="recent-badge"]`, /^Unavailable: \d+% refused$/]);

    for (const [user, role] of [[USERS.root, 'admin'], [USERS.olivia, 'owner'], [USERS.victor, 'viewer']]) {
      const page = await newPage(DESKTOP);
      await signInOk(page, user);
      await pollUntil(`the counts to reach ${role}'s application page`, async () => {
        await page.goto(`/apps/${APP.slug}`);
        for (const [selector, text] of expected) {
          const found = page.locator(selector);
          if ((await found.count()) !== 1 || !text.test((await found.textContent()).replace(/\s+/g, ' ').trim())) return false;
        }
        return true;
      }, { timeoutMs: COUNTED_TIMEOUT_MS, intervalMs: 1000 });
      // On a desktop the rows themselves are on the first screen; on a phone, where each
      // row is a card, the line that counts them by status is.
      const counts = '#status-counts';
      assert.match(await page.locator(counts).textContent(), refusals ? /1 refusing \(503: Redis unreachable\), 1 would deny \(shadow\)/ : /1 would deny \(shadow\)/);
      for (const [size, selectors] of [[DESKTOP, expected.map(([s]) => s)], [PHONE, [counts, '#held-by-others']]]) {
        await page.setViewportSize(size);
        await page.goto(`/apps/${APP.slug}`);
        for (const selector of selectors) {
          assert.ok(await onFirstScreen(page, page.locator(selector)), `${role} at ${size.width} px: ${selector} on the first screen`);
        }
        assert.deepEqual(await clippedControls(page), [], `${role} at ${size.width} px`);
      }
      await assertAccessible(page);
      await screenshots(page, `glance-app-${role}`);

      await page.goto('/apps');
      const attention = await page.locator('#attention').textContent();
      for (const name of refusals ? [SHADOW, CLOSED] : [SHADOW]) assert.ok(attention.includes(name), `${role}: ${name} needs attention`);
      await assertAccessible(page);
      await screenshots(page, `glance-apps-${role}`);
    }

    const nobody = await newPage(DESKTOP);
    await signInOk(nobody, USERS.nadia);
    await nobody.goto('/apps');
    assert.equal(await nobody.locator('#attention').count(), 0, 'nothing of shop needs her attention');
    assert.ok(!(await nobody.locator('main').textContent()).includes(APP.slug), 'shop is not listed');
    await assertAccessible(nobody);
    await screenshots(nobody, 'glance-apps-no-application');
    // Forbidden, as in the admin API, and nothing of their state on the page.
    for (const path of [`/apps/${APP.slug}`, `/policies/${SHADOW}`, `/policies/${CLOSED}`, `/policies/${OTHERS}`]) {
      assert.equal((await nobody.goto(path)).status(), 403, path);
      assert.ok(!(await nobody.locator('main').textContent()).includes('glance'), `${path} names no policy`);
    }
  });
});
