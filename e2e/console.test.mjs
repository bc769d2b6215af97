// End-to-end tests of the web console in headless Chromium, against the real server
// (see harness.mjs). Run with scripts/e2e.sh, or `node --test e2e/` once the binary is
// built.
//
// The page contract these tests rely on (selectors and flows) is listed in e2e/README.md.

import assert from 'node:assert/strict';

import { APP, USERS, pollUntil, screenshots } from './harness.mjs';
import {
  LIVE_UPDATE_TIMEOUT_MS,
  assertLabelled,
  consoleSuite,
  env,
  newPage,
  nextFormPost,
  optionValues,
  pathname,
  policyForm,
  signIn,
  signInOk,
  uiTest,
} from './ui.mjs';

/** The policy test (a) creates through the console; test (c) reads it. */
const CHECKOUT = { name: 'checkout', rate: '1', rate_unit: 'minute', max_permits: '3' };

/** Creates policy `checkout` through the admin API unless it exists (test (c) alone). */
async function ensureCheckoutPolicy() {
  const got = await env.server.api('GET', `/api/v1/policies/${CHECKOUT.name}`);
  if (got.status === 200) return;
  await env.server.api(
    'POST',
    '/api/v1/policies',
    { name: CHECKOUT.name, owner_app: APP.slug, rate: 1 / 60, max_permits: 3 },
    201,
  );
}

consoleSuite('console', () => {
  uiTest('harness: server up, seeded, home page loads in Chromium', async () => {
    const app = await env.server.api('GET', `/api/v1/apps/${APP.slug}`, undefined, 200);
    assert.equal(app.name, APP.name);
    const roles = Object.fromEntries(app.members.map((m) => [m.username, m.role]));
    assert.equal(roles.olivia, 'owner');
    assert.equal(roles.victor, 'viewer');
    assert.match(env.server.apiKey, /\S{16,}/);

    // `/` is a page of the console or a redirect to one: it ends on an HTML page.
    const page = await newPage();
    const resp = await page.goto('/');
    assert.ok(resp.status() < 400, `GET / ended with ${resp.status()} at ${page.url()}`);
    assert.match(resp.headers()['content-type'] || '', /text\/html/);
    assert.match(await page.title(), /ratekeeper/);
  });

  uiTest('(d) a wrong password shows an alert and does not sign in', async () => {
    const page = await newPage();
    const resp = await page.goto('/login');
    assert.equal(resp.status(), 200, `GET /login answered ${resp.status()}`);
    await screenshots(page, 'login');
    const post = await signIn(page, { ...USERS.olivia, password: 'not-her-password' });
    assert.notEqual(post.status(), 303, 'a wrong password must not redirect');
    await page.waitForLoadState();
    assert.notEqual(pathname(page), '/apps');
    const alert = page.locator('[role=alert]');
    await alert.first().waitFor({ state: 'visible' });
    assert.ok((await alert.first().innerText()).trim().length > 0, '[role=alert] is empty');
    assert.equal(await page.locator('#login-form').count(), 1, 'the sign-in form is shown again');
    await screenshots(page, 'login-error');
  });

  uiTest('(a) owner creates a policy; its bucket level updates live', async (t) => {
    const page = await newPage();
    await signInOk(page, USERS.olivia);

    // /apps: heading and a link per app.
    assert.equal((await page.locator('h1').first().innerText()).trim(), 'Applications');
    const link = page.locator(`a[href="/apps/${APP.slug}"]`);
    assert.ok((await link.count()) >= 1, `no a[href="/apps/${APP.slug}"] on /apps`);
    await screenshots(page, 'apps');

    // /apps/shop: the name is escaped text, not markup.
    await Promise.all([page.waitForURL((u) => u.pathname === `/apps/${APP.slug}`), link.first().click()]);
    const h1 = page.locator('h1').first();
    assert.equal((await h1.innerText()).trim(), APP.name);
    assert.equal(await page.locator('h1 co').count(), 0, 'the app name was rendered as markup');
    for (const id of ['policies', 'members', 'keys']) {
      assert.equal(await page.locator(`section#${id}`).count(), 1, `no section#${id}`);
    }

    // The policy form.
    const newPolicy = page.locator('a#new-policy');
    assert.equal(await newPolicy.getAttribute('href'), `/apps/${APP.slug}/policies/new`);
    await Promise.all([
      page.waitForURL((u) => u.pathname === `/apps/${APP.slug}/policies/new`),
      newPolicy.click(),
    ]);
    const form = policyForm(page);
    assert.equal(await form.count(), 1, 'no form with a "Create policy" button');
    const field = (name) => form.locator(`[name="${name}"]`);
    for (const name of ['name', 'rate', 'rate_unit', 'max_permits', 'failure_mode', 'enabled', 'description']) {
      assert.equal(await field(name).count(), 1, `policy form: no single [name=${name}]`);
      await assertLabelled(field(name), `policy form field ${name}`);
    }
    assert.equal(await field('rate').getAttribute('type'), 'number');
    assert.equal(await field('rate_unit').evaluate((el) => el.tagName), 'SELECT');
    const units = await optionValues(field('rate_unit'));
    for (const u of ['second', 'minute', 'hour']) assert.ok(units.includes(u), `rate_unit lacks ${u}: ${units}`);
    assert.equal(await field('failure_mode').evaluate((el) => el.tagName), 'SELECT');
    assert.deepEqual((await optionValues(field('failure_mode'))).sort(), ['closed', 'open']);
    assert.equal(await field('enabled').getAttribute('type'), 'checkbox');
    assert.equal(await field('enabled').isChecked(), true, 'enabled is not checked by default');
    assert.equal(await field('description').evaluate((el) => el.tagName), 'TEXTAREA');
    // Allowed applications: one labelled checkbox per application, its own ticked.
    const own = form.locator(`input[type=checkbox][name="allowed_apps"][value="${APP.slug}"]`);
    assert.equal(await own.count(), 1, `no allowed_apps checkbox for ${APP.slug}`);
    await assertLabelled(own, `allowed_apps checkbox ${APP.slug}`);
    assert.equal(await own.isChecked(), true, `allowed_apps ${APP.slug} is not ticked by default`);

    await field('name').fill(CHECKOUT.name);
    await field('rate').fill(CHECKOUT.rate);
    await field('rate_unit').selectOption(CHECKOUT.rate_unit);
    await field('max_permits').fill(CHECKOUT.max_permits);
    await field('failure_mode').selectOption('closed');
    await field('description').fill('created by the browser tests');
    const [post] = await Promise.all([
      nextFormPost(page),
      form.getByRole('button', { name: 'Create policy', exact: true }).click(),
    ]);
    assert.equal(post.status(), 303, `creating the policy answered ${post.status()}`);
    await page.waitForURL((u) => u.pathname === `/apps/${APP.slug}`);

    // The new row, with its rate in words.
    const row = page.locator(`#policies tr[data-policy="${CHECKOUT.name}"]`);
    await row.waitFor({ state: 'visible' });
    const rate = (await row.locator('[data-col="rate"]').innerText()).replace(/\s+/g, ' ').trim();
    assert.match(rate, /\b1 per minute\b/, `rate cell reads ${JSON.stringify(rate)}`);
    assert.equal(await row.locator('a.edit').count(), 1, 'owner sees no a.edit in the row');
    assert.equal(await row.locator('a.delete').count(), 1, 'owner sees no a.delete in the row');
    await screenshots(page, 'apps-shop');

    // What the page shows before the bucket is spent (a full bucket, or a dash before
    // its first use): anything but 0, so that seeing 0 later proves a live update.
    const current = row.locator('[data-col="current"]');
    const initial = (await current.innerText()).trim();
    t.diagnostic(`current permits before acquiring: ${JSON.stringify(initial)}`);
    assert.notEqual(initial, '0', 'the current cell shows 0 before any acquire');

    // A marker that a reload would lose.
    await page.evaluate(() => {
      window.__rkE2eNoReload = true;
    });

    // Spend the bucket from outside the browser. The policy reaches the acquire path
    // at the latest with the next sync pass (500 ms): until then acquire answers 404
    // and consumes nothing, so poll for the first answer that is not a 404.
    const statuses = [];
    await pollUntil(
      `POST /v1/acquire for ${CHECKOUT.name} to find the policy`,
      async () => {
        const r = await env.server.acquire(CHECKOUT.name);
        if (r.status === 404) return false;
        statuses.push(r.status);
        return true;
      },
      { timeoutMs: 10_000 },
    );
    while (statuses.length < 10 && statuses.at(-1) !== 429) {
      statuses.push((await env.server.acquire(CHECKOUT.name)).status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 429], `acquire statuses: ${statuses}`);

    // The page shows the empty bucket by itself.
    const selector = `#policies tr[data-policy="${CHECKOUT.name}"] [data-col="current"]`;
    try {
      await page.waitForFunction(
        (sel) => document.querySelector(sel)?.textContent.trim() === '0',
        selector,
        { timeout: LIVE_UPDATE_TIMEOUT_MS },
      );
    } catch (e) {
      const shown = await page.locator(selector).textContent().catch(() => '(no cell)');
      throw new Error(`${selector} never showed 0 within ${LIVE_UPDATE_TIMEOUT_MS} ms; it shows ${JSON.stringify(shown)}`, { cause: e });
    }
    assert.equal(await page.evaluate(() => window.__rkE2eNoReload), true, 'the page was reloaded');
    // The chart of the last minutes counts the 3 grants and the denial (instances add
    // their counts to Redis every 2 s; the page polls every 2 s).
    const activity = `#policies tr[data-policy="${CHECKOUT.name}"] .activity-text`;
    await page.waitForFunction(
      (sel) => document.querySelector(sel)?.textContent.trim() === '3 granted, 1 denied',
      activity,
      { timeout: LIVE_UPDATE_TIMEOUT_MS },
    );
    assert.equal(await page.locator(`#policies tr[data-policy="${CHECKOUT.name}"] svg.chart rect.g`).count() > 0, true);
    await screenshots(page, 'apps-shop-live');

    // Sign out: afterwards /apps no longer shows the applications.
    const logout = page.locator('form#logout');
    await Promise.all([nextFormPost(page), logout.getByRole('button', { name: 'Sign out', exact: true }).click()]);
    await page.waitForLoadState();
    const again = await page.goto('/apps');
    const stillIn =
      again.status() === 200 &&
      pathname(page) === '/apps' &&
      (await page.locator('h1', { hasText: 'Applications' }).count()) > 0;
    assert.equal(stillIn, false, 'still signed in after "Sign out"');
  });

  uiTest('(b) validation errors show next to the fields and keep the input', async () => {
    const page = await newPage();
    await signInOk(page, USERS.olivia);
    const formPath = `/apps/${APP.slug}/policies/new`;
    const resp = await page.goto(formPath);
    assert.equal(resp.status(), 200, `GET ${formPath} answered ${resp.status()}`);
    const form = policyForm(page);
    const field = (name) => form.locator(`[name="${name}"]`);
    await field('name').fill('bad name!');
    await field('rate').fill('1');
    await field('rate_unit').selectOption('minute');
    await field('max_permits').fill('0');
    // The server is the authority on validity: step around client-side constraints
    // (min=, pattern=, required) so that its error messages are what is tested.
    await form.evaluate((f) => {
      f.noValidate = true;
    });
    await Promise.all([nextFormPost(page), form.getByRole('button', { name: 'Create policy', exact: true }).click()]);
    await page.waitForLoadState();

    assert.notEqual(pathname(page), `/apps/${APP.slug}`, 'an invalid policy was accepted');
    assert.equal(await policyForm(page).count(), 1, 'the form is not shown again');
    for (const id of ['max_permits-error', 'name-error']) {
      const el = page.locator(`#${id}`);
      assert.equal(await el.isVisible(), true, `#${id} is not visible`);
      assert.ok((await el.innerText()).trim().length > 0, `#${id} is empty`);
    }
    assert.equal(await policyForm(page).locator('[name="name"]').inputValue(), 'bad name!');
    assert.equal(await policyForm(page).locator('[name="max_permits"]').inputValue(), '0');
    await screenshots(page, 'policy-form-errors');
  });

  uiTest('(e) the form shows the fields of the chosen algorithm, and a fixed window is listed', async () => {
    const page = await newPage();
    await signInOk(page, USERS.olivia);
    await page.goto(`/apps/${APP.slug}/policies/new`);
    const form = policyForm(page);
    const field = (name) => form.locator(`[name="${name}"]`);
    // The token bucket (the default) takes a rate and no window.
    assert.equal(await field('rate').isVisible(), true, 'rate hidden for token_bucket');
    assert.equal(await field('window').isVisible(), false, 'window shown for token_bucket');
    await field('algorithm').selectOption('fixed_window');
    assert.equal(await field('rate').isVisible(), false, 'rate shown for fixed_window');
    assert.equal(await field('window').isVisible(), true, 'window hidden for fixed_window');
    assert.equal(await field('lease_ttl').isVisible(), false, 'lease_ttl shown for fixed_window');
    await field('name').fill('search');
    await field('window').fill('1');
    await field('window_unit').selectOption('minute');
    await field('max_permits').fill('5');
    await screenshots(page, 'policy-form-fixed-window');
    await Promise.all([nextFormPost(page), form.getByRole('button', { name: 'Create policy', exact: true }).click()]);
    await page.waitForLoadState();
    assert.equal(pathname(page), `/apps/${APP.slug}`, `after create: ${pathname(page)}`);
    const row = page.locator('#policies tr[data-policy="search"]');
    await row.waitFor({ state: 'visible' });
    assert.equal((await row.locator('[data-col="algorithm"]').innerText()).trim(), 'Fixed window');
    assert.equal((await row.locator('[data-col="rate"]').innerText()).trim(), '5 per minute');
    assert.equal((await row.locator('[data-col="current"]').innerText()).trim(), '5');
  });

  uiTest('(c) a viewer sees the policies but no edit controls', async () => {
    await ensureCheckoutPolicy();
    const page = await newPage();
    await signInOk(page, USERS.victor);
    const resp = await page.goto(`/apps/${APP.slug}`);
    assert.equal(resp.status(), 200);
    await page.locator(`#policies tr[data-policy="${CHECKOUT.name}"]`).waitFor({ state: 'visible' });

    assert.equal(await page.locator('a#new-policy').count(), 0, 'viewer sees a#new-policy');
    assert.equal(await page.locator('a.edit').count(), 0, 'viewer sees a.edit');
    assert.equal(await page.locator('a.delete').count(), 0, 'viewer sees a.delete');
    assert.equal(await page.locator('form#logout').count(), 1, 'no form#logout');
    const posts = await page
      .locator('form[method="post" i]:not(#logout)')
      .evaluateAll((fs) => fs.map((f) => f.outerHTML.slice(0, 120)));
    assert.deepEqual(posts, [], 'viewer page has POST forms besides form#logout');

    const denied = await page.goto(`/apps/${APP.slug}/policies/new`);
    assert.equal(denied.status(), 403, `viewer GET policies/new answered ${denied.status()}`);
  });

  uiTest('(f) a per-key policy: its override on the form, one key looked up and reset on its page', async () => {
    const page = await newPage();
    await signInOk(page, USERS.olivia);
    await page.goto(`/apps/${APP.slug}/policies/new`);
    const form = policyForm(page);
    const field = (name) => form.locator(`[name="${name}"]`);
    for (const name of ['scope', 'overrides']) await assertLabelled(field(name), `policy form field ${name}`);
    await field('name').fill('logins');
    await field('rate').fill('1');
    await field('rate_unit').selectOption('hour');
    await field('max_permits').fill('2');
    await field('scope').selectOption('per_key');
    await field('overrides').fill('vip max_permits=5');
    await screenshots(page, 'policy-form-per-key');
    await Promise.all([nextFormPost(page), form.getByRole('button', { name: 'Create policy', exact: true }).click()]);
    await page.waitForURL((u) => u.pathname === `/apps/${APP.slug}`);

    // Lock one user out from outside the browser (once the policy reached the acquire path).
    const statuses = [];
    await pollUntil(
      'POST /v1/acquire for logins to find the policy',
      async () => {
        const r = await env.server.acquire('logins', 1, 'mallory');
        if (r.status === 404) return false;
        statuses.push(r.status);
        return true;
      },
      { timeoutMs: 10_000 },
    );
    while (statuses.length < 10 && statuses.at(-1) !== 429) {
      statuses.push((await env.server.acquire('logins', 1, 'mallory')).status);
    }
    assert.deepEqual(statuses, [200, 200, 429], `acquire statuses: ${statuses}`);

    // From the app's table to the policy's page, then the key box.
    const link = page.locator('#policies tr[data-policy="logins"] a.policy-link');
    await Promise.all([page.waitForURL((u) => u.pathname === '/policies/logins'), link.click()]);
    assert.equal(await page.locator('tr[data-override="vip"]').count(), 1, 'the override is not listed');
    const lookup = page.getByLabel('Key', { exact: true });
    await lookup.fill('mallory');
    await Promise.all([page.waitForURL((u) => u.searchParams.get('key') === 'mallory'), lookup.press('Enter')]);
    const current = page.locator('[data-fact="current"]');
    assert.equal((await current.innerText()).trim(), '0 of 2');
    await screenshots(page, 'policy-page-key');

    const reset = page.locator('form#reset-form');
    await Promise.all([nextFormPost(page), reset.getByRole('button', { name: 'Reset to full', exact: true }).click()]);
    await page.waitForLoadState();
    assert.equal((await page.locator('[data-fact="current"]').innerText()).trim(), '2 of 2');
    assert.match(await page.locator('.notice, [role=status]').first().innerText(), /Bucket reset to full/);
    assert.equal((await env.server.acquire('logins', 1, 'mallory')).status, 200, 'mallory is not let in again');
  });

  uiTest('screenshots of the other console pages', async (t) => {
    const pages = [
      { name: 'audit', path: '/audit', user: USERS.root },
      { name: 'users', path: '/users', user: USERS.root },
      { name: 'account', path: '/account', user: USERS.olivia },
    ];
    for (const p of pages) {
      await t.test(`${p.path} as ${p.user.username}`, async () => {
        const page = await newPage();
        await signInOk(page, p.user);
        const resp = await page.goto(p.path);
        // These pages exist: a 404, or any answer but 200, fails the test.
        assert.ok(resp, `GET ${p.path} gave no response`);
        assert.equal(resp.status(), 200, `GET ${p.path} answered ${resp.status()}`);
        await screenshots(page, p.name);
      });
    }
  });
});
