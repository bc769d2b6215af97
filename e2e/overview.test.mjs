// Seeing at a glance in headless Chromium (see harness.mjs): a policy's own page with its
// fullness and usage charts (owner), a shadow policy's would-be denials (owner), an
// application with many policies filtered, sorted and paged, and the limits other
// applications set on it (viewer), and what travels over the wire (admin).

import assert from 'node:assert/strict';

import { APP, USERS, pollUntil, screenshots } from './harness.mjs';
import { assertAccessible, consoleSuite, env, newPage, pathname, signInOk, uiTest } from './ui.mjs';

/** A policy of `owner` (shop by default) made through the admin API. */
async function createPolicy(name, fields = {}, owner = APP.slug) {
  await env.server.api('POST', '/api/v1/policies', { name, owner_app: owner, rate: 0.001, max_permits: 5, ...fields }, 201);
}

/** The policy names of the table's rows, in order. */
const rowNames = (page) =>
  page.locator('#policies tr[data-policy]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-policy')));

consoleSuite('overview', () => {
  uiTest('an owner reads a policy page: how full it is, and its usage over an hour, a day and a week', async () => {
    await createPolicy('ov.tight', { max_permits: 2 });
    for (const expected of [200, 200, 429]) {
      assert.equal((await env.server.acquire('ov.tight')).status, expected);
    }
    const page = await newPage();
    await signInOk(page, USERS.olivia);
    await page.goto(`/apps/${APP.slug}`);
    await Promise.all([
      page.waitForURL((u) => u.pathname === '/policies/ov.tight'),
      page.locator('#policies tr[data-policy="ov.tight"] a.policy-link').click(),
    ]);
    assert.equal((await page.locator('[data-fact="gauge"]').textContent()).trim(), '0 / 2');
    assert.equal(await page.locator('#bucket .badge').textContent(), 'At its limit');
    // The counts reach Redis with the next flush (every 2 s): reload until they show.
    await pollUntil('the charts count 2 granted and 1 denied', async () => {
      await page.reload();
      const totals = await page.locator('[data-total="denied"]').allTextContents();
      return totals.length === 3 && totals.every((t) => t === '1');
    }, { timeoutMs: 20_000, intervalMs: 500 });
    assert.deepEqual(await page.locator('[data-total="granted"]').allTextContents(), ['2', '2', '2']);
    assert.deepEqual(
      await page.locator('.usage-chart figcaption strong').allTextContents(),
      ['Last hour', 'Last 24 hours', 'Last 7 days'],
    );
    const label = await page.locator('svg.usage').first().getAttribute('aria-label');
    assert.equal(label, 'Last hour: 2 granted, 1 denied');
    assert.equal(await page.locator('#edit-policy').count(), 1, 'the owner may edit');
    await assertAccessible(page);
    await screenshots(page, 'policy-page');
  });

  uiTest('a policy page draws itself again: a grant shows without a reload, and a saved version is marked', async () => {
    await createPolicy('ov.live', { max_permits: 3 });
    const page = await newPage();
    await signInOk(page, USERS.olivia);
    await page.goto('/policies/ov.live');
    await page.evaluate(() => { window.__rkNoReload = true; });
    assert.equal((await page.locator('[data-fact="gauge"]').textContent()).trim(), '3 / 3');
    assert.match(await page.locator('#as-of').textContent(), /^As of \d\d:\d\d:\d\d UTC; drawn again every 10 s/);
    assert.equal((await env.server.acquire('ov.live')).status, 200);
    await page.waitForFunction(
      () => document.querySelector('[data-fact="gauge"]')?.textContent.trim() === '2 / 3',
      null,
      { timeout: 30_000 },
    );
    assert.equal(await page.evaluate(() => window.__rkNoReload), true, 'drawn again, not reloaded');
    // A version saved meanwhile is marked on the charts, linking to it in the history.
    await env.server.api('PATCH', '/api/v1/policies/ov.live', { max_permits: 4 }, 200);
    await page.waitForFunction(
      () => document.querySelectorAll('.usage-versions a[href="/policies/ov.live/history#version-2"]').length === 3,
      null,
      { timeout: 30_000 },
    );
    assert.equal(await page.locator('h1 small').textContent(), 'v2');
    assert.equal(await page.locator('svg.usage line.version').count() >= 3, true, 'a line on each chart');
    await assertAccessible(page);
  });

  uiTest('an owner watches a shadow policy: everything granted, the would-be denials in their own colour', async () => {
    await createPolicy('ov.shadow', { max_permits: 2, mode: 'shadow' });
    for (const expected of [false, false, true, true]) {
      const { status, body } = await env.server.acquire('ov.shadow');
      assert.equal(status, 200, 'a shadow policy denies no one');
      assert.equal(body.shadow_denied === true, expected);
    }
    const page = await newPage();
    await signInOk(page, USERS.olivia);
    await page.goto('/policies/ov.shadow');
    assert.match(await page.locator('[data-fact="mode"]').textContent(), /shadow/);
    await pollUntil('the charts count 2 would-be denials', async () => {
      await page.reload();
      const totals = await page.locator('[data-total="shadow_denied"]').allTextContents();
      return totals.length === 3 && totals.every((t) => t === '2');
    }, { timeoutMs: 20_000, intervalMs: 500 });
    assert.deepEqual(await page.locator('[data-total="denied"]').allTextContents(), ['0', '0', '0']);
    assert.ok((await page.locator('svg.usage rect.s').count()) >= 3, 'amber bars of their own');
    await assertAccessible(page);
    await screenshots(page, 'policy-page-shadow');
  });

  uiTest('a viewer filters, sorts and pages many policies, and sees the limits other applications set', async () => {
    for (let i = 0; i < 55; i++) await createPolicy(`ov.many.${String(i).padStart(2, '0')}`);
    await createPolicy('ov.drained', { max_permits: 1 });
    assert.equal((await env.server.acquire('ov.drained')).status, 200);
    await env.server.api('POST', '/api/v1/apps', { slug: 'billing', name: 'Billing', description: '' }, 201);
    await createPolicy('billing.invoices', { allowed_apps: ['billing', APP.slug] }, 'billing');
    await createPolicy('billing.internal', {}, 'billing');

    const page = await newPage();
    await signInOk(page, USERS.victor);
    await page.goto(`/apps/${APP.slug}`);
    assert.equal((await rowNames(page)).length, 50, 'fifty to a page');
    const pager = page.getByRole('navigation', { name: 'Pages of policies' });
    assert.equal(await pager.count(), 1);
    await page.getByLabel('Name contains').fill('ov.many.0');
    await Promise.all([page.waitForURL((u) => u.searchParams.get('q') === 'ov.many.0'), page.getByRole('button', { name: 'Show' }).click()]);
    assert.deepEqual(await rowNames(page), Array.from({ length: 10 }, (_, i) => `ov.many.0${i}`));

    await page.goto(`/apps/${APP.slug}`);
    await page.getByLabel('Sort by').selectOption('status');
    await Promise.all([page.waitForURL((u) => u.searchParams.get('sort') === 'status'), page.getByRole('button', { name: 'Show' }).click()]);
    assert.equal((await rowNames(page))[0], 'ov.drained', 'the policy at its limit comes first');
    assert.equal(await page.locator('#policies tr[data-policy="ov.drained"] [data-col="status"] .badge').textContent(), 'At its limit');
    assert.equal(await page.locator('#policies .row-actions').count(), 0, 'a viewer has no Edit or Delete');
    await assertAccessible(page);
    await screenshots(page, 'app-page-sorted');

    // Limits on this application: billing's policy that allows shop, and not the other.
    const limits = page.locator('#limits-on-app');
    assert.equal(await limits.locator('tr[data-limit-on-app="billing.invoices"]').count(), 1);
    assert.equal(await limits.locator('tr[data-limit-on-app="billing.internal"]').count(), 0);
    await Promise.all([
      page.waitForURL((u) => u.pathname === '/policies/billing.invoices'),
      limits.getByRole('link', { name: 'billing.invoices' }).click(),
    ]);
    assert.equal(await page.locator('#edit-policy').count(), 0, 'nothing to edit there');
    await assertAccessible(page);
    await screenshots(page, 'limits-on-app-policy');
  });

  uiTest('an admin gets pages compressed and the static files by hashed names', async () => {
    const page = await newPage();
    await signInOk(page, USERS.root);
    const response = await page.goto(`/apps/${APP.slug}`);
    assert.equal(response.status(), 200);
    assert.match(response.headers()['content-encoding'] ?? '', /^(br|gzip)$/);
    const css = await page.locator('link[rel=stylesheet]').getAttribute('href');
    assert.match(css, /^\/static\/style\.[0-9a-f]{10}\.css$/);
    const asset = await page.request.get(css);
    assert.match(asset.headers()['cache-control'], /max-age=31536000/);
    assert.equal(pathname(page), `/apps/${APP.slug}`);
    await assertAccessible(page);
    await screenshots(page, 'app-page-admin');
  });
});
