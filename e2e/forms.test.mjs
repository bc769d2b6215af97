// The policy form in headless Chromium: numbers kept in the units they were typed in,
// every error at once, the allowed applications' list with its filter box, and the
// same form without JavaScript.

import assert from 'node:assert/strict';

import { APP, PHONE, USERS, screenshots } from './harness.mjs';
import {
  assertAccessible,
  consoleSuite,
  env,
  newPage,
  nextFormPost,
  pathname,
  policyForm,
  signInOk,
  uiTest,
} from './ui.mjs';

/** An application besides shop, for the allowed applications' list (made once). */
async function ensureOtherApp() {
  const got = await env.server.api('GET', '/api/v1/apps/billing');
  if (got.status === 200) return;
  await env.server.api('POST', '/api/v1/apps', { slug: 'billing', name: 'Billing' }, 201);
}

async function openNewForm(page) {
  await page.goto(`/apps/${APP.slug}/policies/new`);
  const form = policyForm(page);
  await form.evaluate((f) => { f.noValidate = true; });
  return { form, field: (name) => form.locator(`[name="${name}"]`) };
}

async function create(page, form) {
  const [post] = await Promise.all([
    nextFormPost(page),
    form.getByRole('button', { name: 'Create policy', exact: true }).click(),
  ]);
  await page.waitForLoadState();
  return post;
}

consoleSuite('forms', () => {
  uiTest('owner: 100 per day and a 5-minute window come back as typed', async () => {
    const page = await newPage();
    await signInOk(page, USERS.olivia);
    let { form, field } = await openNewForm(page);
    await field('name').fill('reports.daily');
    await field('rate').fill('100');
    await field('rate_unit').selectOption('day');
    await field('max_permits').fill('100');
    assert.equal((await create(page, form)).status(), 303);
    const row = page.locator('#policies tr[data-policy="reports.daily"]');
    assert.equal((await row.locator('[data-col="rate"]').innerText()).trim(), '100 per day');

    await page.goto('/policies/reports.daily/edit');
    assert.equal(await page.locator('[name="rate"]').inputValue(), '100');
    assert.equal(await page.locator('[name="rate_unit"]').inputValue(), 'day');

    ({ form, field } = await openNewForm(page));
    await field('algorithm').selectOption('sliding_window');
    await field('name').fill('exports.window');
    await field('window').fill('5');
    await field('window_unit').selectOption('minute');
    await field('max_permits').fill('10');
    assert.equal((await create(page, form)).status(), 303);
    const windowRow = page.locator('#policies tr[data-policy="exports.window"]');
    assert.equal((await windowRow.locator('[data-col="rate"]').innerText()).trim(), '10 per 5 minutes');
    await page.goto('/policies/exports.window/edit');
    assert.equal(await page.locator('[name="window"]').inputValue(), '5');
    assert.equal(await page.locator('[name="window_unit"]').inputValue(), 'minute');
    await assertAccessible(page);
  });

  uiTest('owner: every error at once, the name kept', async () => {
    const page = await newPage();
    await signInOk(page, USERS.olivia);
    const { form, field } = await openNewForm(page);
    await field('name').fill('too.much');
    await field('rate').fill('70000000');
    await field('rate_unit').selectOption('minute');
    await field('max_permits').fill('12345678901234567890');
    await form.locator(`input[name="allowed_apps"][value="${APP.slug}"]`).uncheck();
    const post = await create(page, form);
    assert.equal(post.status(), 422);
    const error = (id) => page.locator(`#${id}-error`).innerText();
    assert.equal(await error('rate'), 'is too large (at most 60000000 per minute)');
    assert.equal(await error('max_permits'), 'is too large (at most 1000000000)');
    assert.equal(await error('allowed_apps'), 'must name at least one application');
    assert.equal(await page.locator('[name="name"]').inputValue(), 'too.much');
    await assertAccessible(page, 'the form with three errors');
    await page.emulateMedia({ colorScheme: 'dark' });
    await screenshots(page, 'dark-form-all-errors');
  });

  uiTest('owner: the filter box narrows the applications; the ticked ones are sent', async () => {
    await ensureOtherApp();
    const page = await newPage(PHONE);
    await signInOk(page, USERS.olivia);
    const { form, field } = await openNewForm(page);
    const filter = page.getByLabel('Filter applications');
    assert.equal(await filter.isVisible(), true, 'the filter box is hidden with the script on');
    const box = (slug) => form.locator(`input[name="allowed_apps"][value="${slug}"]`);
    await filter.fill('bill');
    assert.equal(await box(APP.slug).isVisible(), false, `${APP.slug} still shown for "bill"`);
    assert.equal(await box('billing').isVisible(), true, 'billing hidden for "bill"');
    assert.match(await page.locator('#allowed_apps_filter-status').innerText(), /1 of \d+ applications shown/);
    await box('billing').check();
    await filter.fill('');
    assert.equal(await box(APP.slug).isVisible(), true);
    await field('name').fill('shared.limit');
    await field('rate').fill('1');
    await field('max_permits').fill('1');
    assert.equal((await create(page, form)).status(), 303);
    const policy = await env.server.api('GET', '/api/v1/policies/shared.limit', undefined, 200);
    assert.deepEqual([...policy.allowed_apps].sort(), ['billing', APP.slug].sort());
  });

  uiTest('without JavaScript: no filter box, every checkbox, the form still works', async () => {
    await ensureOtherApp();
    const page = await newPage(undefined, { javaScriptEnabled: false });
    await signInOk(page, USERS.olivia);
    await page.goto(`/apps/${APP.slug}/policies/new`);
    const form = policyForm(page);
    assert.equal(await page.locator('.filter').isVisible(), false, 'a filter box that cannot work is shown');
    assert.equal(await form.locator('input[name="allowed_apps"][value="billing"]').isVisible(), true);
    await form.locator('[name="name"]').fill('plain.form');
    await form.locator('[name="rate"]').fill('3');
    await form.locator('[name="max_permits"]').fill('3');
    await form.locator('input[name="allowed_apps"][value="billing"]').check();
    const post = await create(page, form);
    assert.equal(post.status(), 303);
    assert.equal(pathname(page), `/apps/${APP.slug}`);
    const policy = await env.server.api('GET', '/api/v1/policies/plain.form', undefined, 200);
    assert.deepEqual([...policy.allowed_apps].sort(), ['billing', APP.slug].sort());
  });
});
