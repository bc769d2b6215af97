// What the console shows of a Redis outage seen by one instance: a fail-closed policy
// refused acquires with 503 there, and once that instance reaches Redis again its counts
// land where every instance's console reads them. Looked at as the application's viewer
// and owner (screenshots at 1280 and 390 px).

import assert from 'node:assert/strict';

import { refusedOnAnotherInstance } from './cuttable_proxy.mjs';
import { APP, DESKTOP, PHONE, USERS, pollUntil, screenshots } from './harness.mjs';
import { assertAccessible, clippedControls, consoleSuite, env, newPage, signInOk, uiTest } from './ui.mjs';

const POLICY = 'outage.checkout';
// The other instance reconnects with a backoff of its own, then flushes every 2 s.
const COUNTED_TIMEOUT_MS = 60_000;

consoleSuite('outage', () => {
  uiTest('a policy that refused with 503 on another instance reads "Unavailable" for viewer and owner', async (t) => {
    const redis = env.server.redisAddress();
    if (redis.cluster) {
      t.skip('a Redis cluster: no single address to put a proxy in front of');
      return;
    }
    await env.server.api('POST', '/api/v1/policies', { name: POLICY, owner_app: APP.slug, rate: 100, max_permits: 100, failure_mode: 'closed' }, 201);
    await refusedOnAnotherInstance(env.server, redis, POLICY, 3, async () => {
      for (const [user, who] of [[USERS.victor, 'viewer'], [USERS.olivia, 'owner']]) {
        const page = await newPage(DESKTOP);
        await signInOk(page, user);
        const badge = page.locator(`#policies tr[data-policy="${POLICY}"] [data-col="recent-badge"]`);
        await pollUntil('the 503s to reach the console', async () => {
          await page.goto(`/apps/${APP.slug}?status=attention`);
          return /^Unavailable: \d+% refused$/.test((await badge.textContent()).trim());
        }, { timeoutMs: COUNTED_TIMEOUT_MS, intervalMs: 1000 });
        assert.match(await page.locator('#status-counts').textContent(), /1 refusing \(503: Redis unreachable\)/);
        await assertAccessible(page);
        await screenshots(page, `outage-app-${who}`);
        await page.goto(`/policies/${POLICY}`);
        assert.match(await page.locator('.usage-chart').first().textContent(), /3 refused with 503: Redis unreachable/);
        await page.goto('/apps');
        assert.ok((await page.locator('#attention').textContent()).includes(POLICY), 'listed as needing attention');
        await assertAccessible(page);
        await screenshots(page, `outage-apps-${who}`);
        // On a phone, the longest badge wraps in its card rather than being cut.
        await page.setViewportSize(PHONE);
        for (const path of ['/apps', `/apps/${APP.slug}`]) {
          await page.goto(path);
          assert.deepEqual(await clippedControls(page), [], path);
        }
      }
    });
  });

  uiTest('a deleted policy keeps an accessible page: the viewer reads it, the owner recreates it', async () => {
    const name = 'outage.deleted';
    await env.server.api('POST', '/api/v1/policies', { name, owner_app: APP.slug, rate: 2, max_permits: 7 }, 201);
    await env.server.api('DELETE', `/api/v1/policies/${name}`, undefined, 204);
    const viewer = await newPage(DESKTOP);
    await signInOk(viewer, USERS.victor);
    assert.equal((await viewer.goto(`/policies/${name}`)).status(), 200);
    assert.match(await viewer.locator('#deleted-summary').textContent(), /root deleted it/);
    assert.equal(await viewer.locator('#recreate-form').count(), 0, 'a viewer has no button');
    await assertAccessible(viewer);
    await screenshots(viewer, 'deleted-policy-viewer');
    const owner = await newPage(DESKTOP);
    await signInOk(owner, USERS.olivia);
    await owner.goto(`/policies/${name}`);
    await Promise.all([owner.waitForURL((u) => u.pathname === `/policies/${name}`), owner.locator('#recreate-form button').click()]);
    assert.match(await owner.locator('main').textContent(), /Policy created again as it was when it was deleted/);
  });
});
