// The console's chrome in headless Chromium: every page the tests visit passes
// axe-core (light and dark), error pages keep the navigation, viewers see the read-only
// banner, and the system's dark mode is followed (screenshots at 1280 and 390 px in
// e2e/screenshots/dark-*.png).

import assert from 'node:assert/strict';

import { APP, USERS, screenshots } from './harness.mjs';
import { assertAccessible, consoleSuite, env, newPage, signInOk, uiTest } from './ui.mjs';

const POLICY = 'chrome.check';

/** A policy of the app to visit (made once, through the admin API). */
async function ensurePolicy() {
  const got = await env.server.api('GET', `/api/v1/policies/${POLICY}`);
  if (got.status === 200) return;
  await env.server.api(
    'POST',
    '/api/v1/policies',
    { name: POLICY, owner_app: APP.slug, rate: 2, max_permits: 5, description: 'for the chrome tests' },
    201,
  );
}

/** Goes to `path` (answering `status`), checks it with axe-core in light and dark. */
async function visit(page, path, status = 200, shot = null) {
  const resp = await page.goto(path);
  assert.equal(resp.status(), status, `GET ${path} answered ${resp.status()}`);
  for (const colorScheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme });
    await assertAccessible(page, `${path} (${colorScheme})`);
  }
  if (shot) await screenshots(page, `dark-${shot}`);
  await page.emulateMedia({ colorScheme: 'light' });
}

/** Whether the page shows the navigation of `user`. */
async function hasNavigationOf(page, user) {
  const nav = page.locator('nav[aria-label="Main"]');
  return (await nav.count()) === 1 && (await nav.locator('a[href="/account"]').innerText()).trim() === user;
}

consoleSuite('chrome', () => {
  uiTest('the sign-in page is accessible, light and dark', async () => {
    const page = await newPage();
    await visit(page, '/login', 200, 'login');
  });

  uiTest('owner: every page passes axe-core and follows dark mode', async () => {
    await ensurePolicy();
    const page = await newPage();
    await signInOk(page, USERS.olivia);
    await visit(page, '/apps', 200, 'apps');
    await visit(page, `/apps/${APP.slug}`, 200, 'apps-shop');
    await visit(page, `/policies/${POLICY}/overview`, 200, 'policy-page');
    await visit(page, `/apps/${APP.slug}/policies/new`, 200, 'policy-form');
    await visit(page, `/policies/${POLICY}/edit`);
    await visit(page, `/policies/${POLICY}/delete`, 200, 'delete');
    await visit(page, '/audit', 200, 'audit');
    await visit(page, '/account', 200, 'account');
    await visit(page, `/apps/${APP.slug}/webhooks`, 200, 'webhooks');
    await visit(page, '/apps/no-such-app', 404, 'error-404');
    assert.ok(await hasNavigationOf(page, USERS.olivia.username), 'the 404 page lost the navigation');

    // Dark mode really changes the colours (and light mode is light).
    await page.goto(`/apps/${APP.slug}`);
    const background = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    await page.emulateMedia({ colorScheme: 'light' });
    const light = await background();
    await page.emulateMedia({ colorScheme: 'dark' });
    const dark = await background();
    const luminance = (rgb) => rgb.match(/\d+/g).slice(0, 3).reduce((a, b) => a + Number(b), 0) / 3;
    assert.ok(luminance(light) > 200, `light background ${light}`);
    assert.ok(luminance(dark) < 60, `dark background ${dark}`);
  });

  uiTest('owner: a form with errors and an error page pass axe-core', async () => {
    const page = await newPage();
    await signInOk(page, USERS.olivia);
    await page.goto(`/apps/${APP.slug}/policies/new`);
    await page.locator('form.grid-form').evaluate((f) => { f.noValidate = true; });
    await page.locator('[name="name"]').fill('bad name!');
    await page.locator('[name="max_permits"]').fill('0');
    await Promise.all([page.waitForLoadState(), page.getByRole('button', { name: 'Create policy' }).click()]);
    await page.locator('#name-error').waitFor({ state: 'visible' });
    for (const colorScheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme });
      await assertAccessible(page, `policy form with errors (${colorScheme})`);
    }
    await screenshots(page, 'dark-policy-form-errors');
    await visit(page, '/audit?page=two', 400, 'error-400');
    assert.match(await page.locator('main').innerText(), /page must be a whole number from 1/);
    assert.ok(await hasNavigationOf(page, USERS.olivia.username), 'the 400 page lost the navigation');
  });

  uiTest('viewer: a read-only banner, and a 403 inside the navigation', async () => {
    await ensurePolicy();
    const page = await newPage();
    await signInOk(page, USERS.victor);
    for (const [path, shot] of [[`/apps/${APP.slug}`, 'viewer-apps-shop'], [`/policies/${POLICY}/overview`, null]]) {
      await visit(page, path, 200, shot);
      const banner = page.locator('#read-only');
      assert.equal(await banner.count(), 1, `no read-only banner on ${path}`);
      assert.match(await banner.innerText(), /its owners can change it/);
    }
    await visit(page, `/apps/${APP.slug}/policies/new`, 403, 'error-403');
    assert.ok(await hasNavigationOf(page, USERS.victor.username), 'the 403 page lost the navigation');
  });

  uiTest('admin: users and applications pass axe-core; times show their exact value', async () => {
    const page = await newPage();
    await signInOk(page, USERS.root);
    await visit(page, '/users', 200, 'users');
    await visit(page, '/apps');
    await page.goto('/users');
    const time = page.locator('main time').first();
    assert.match((await time.getAttribute('title')) || '', / UTC$/);
    assert.match((await time.getAttribute('datetime')) || '', /^\d{4}-\d\d-\d\dT/);
  });
});
