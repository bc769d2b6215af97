// A policy's history and the audit log in headless Chromium (see harness.mjs): an owner
// edits a policy twice, reads the changes in the form's units and rolls back; a viewer
// reads the history without any rollback button; the admin reads the audit log's diffs,
// filters it from its lists and downloads it as CSV.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';

import { APP, USERS, screenshots } from './harness.mjs';
import { consoleSuite, env, newPage, nextFormPost, optionValues, pathname, signInOk, uiTest } from './ui.mjs';

/** A policy of shop made through the admin API: 5 per second, at most 5. */
async function createPolicy(name) {
  await env.server.api('POST', '/api/v1/policies', { name, owner_app: APP.slug, rate: 5, max_permits: 5 }, 201);
}

/** Saves the edit form of `name` with `fields` ({name: value}) changed; ends on /apps/shop. */
async function editPolicy(page, name, fields) {
  await page.goto(`/policies/${name}/edit`);
  for (const [field, value] of Object.entries(fields)) {
    const input = page.locator(`[name="${field}"]`);
    if ((await input.evaluate((el) => el.tagName)) === 'SELECT') await input.selectOption(value);
    else await input.fill(value);
  }
  const [post] = await Promise.all([nextFormPost(page), page.getByRole('button', { name: 'Save changes' }).click()]);
  assert.equal(post.status(), 303, `saving ${name} answered ${post.status()}`);
  await page.waitForURL((u) => u.pathname === `/apps/${APP.slug}`);
}

/** The text of one version of the history, spaces collapsed. */
async function versionText(page, version) {
  const text = await page.locator(`#version-${version}`).textContent();
  return text.replace(/\s+/g, ' ').replaceAll('→ becomes', '→');
}

consoleSuite('history', () => {
  uiTest('an owner sees each change in the form units and rolls back', async () => {
    await createPolicy('hist.owner');
    const page = await newPage();
    await signInOk(page, USERS.olivia);
    await editPolicy(page, 'hist.owner', { rate: '100', rate_unit: 'minute' });
    await editPolicy(page, 'hist.owner', { max_permits: '8' });

    await page.goto('/policies/hist.owner/overview');
    await page.getByRole('link', { name: 'History of versions' }).click();
    await page.waitForURL((u) => u.pathname === '/policies/hist.owner/history');
    assert.equal(await page.locator('h1').first().textContent(), 'History of hist.owner');
    assert.match(await versionText(page, 2), /rate: 300 per minute → 100 per minute/);
    assert.match(await versionText(page, 3), /\(current\).*max permits: 5 → 8/);
    assert.match(await versionText(page, 1), /Created by root.*rate: 5 per second/);
    await screenshots(page, 'history');

    const [post] = await Promise.all([
      nextFormPost(page),
      page.getByRole('button', { name: 'Roll back to version 1' }).click(),
    ]);
    assert.equal(post.status(), 303);
    await page.waitForURL((u) => u.pathname === '/policies/hist.owner/history');
    assert.match(await page.locator('[role=status]').textContent(), /Rolled back/);
    const v4 = await versionText(page, 4);
    assert.match(v4, /\(current\)/);
    assert.match(v4, /Rolled back to version 1 by olivia/);
    assert.match(v4, /rate: 100 per minute → 300 per minute/);
    assert.match(v4, /max permits: 8 → 5/);
    const policy = await env.server.api('GET', '/api/v1/policies/hist.owner', undefined, 200);
    assert.equal(policy.version, 4);
    assert.equal(policy.max_permits, 5);
  });

  uiTest('a viewer reads the history without a rollback button', async () => {
    await createPolicy('hist.viewer');
    await env.server.api('PATCH', '/api/v1/policies/hist.viewer', { max_permits: 7, version: 1 }, 200);
    const page = await newPage();
    await signInOk(page, USERS.victor);
    const resp = await page.goto('/policies/hist.viewer/history');
    assert.equal(resp.status(), 200);
    assert.match(await versionText(page, 2), /max permits: 5 → 7/);
    assert.equal(await page.getByRole('button', { name: /Roll back/ }).count(), 0);
    assert.equal(await page.locator('form[method=post]:not(#logout)').count(), 0);
    await screenshots(page, 'history-viewer');
  });

  uiTest('the admin reads the audit diffs, filters from the lists and downloads CSV', async () => {
    await createPolicy('hist.audit');
    await env.server.api('PATCH', '/api/v1/policies/hist.audit', { rate: 0.2, version: 1 }, 200);
    const page = await newPage();
    await signInOk(page, USERS.root);
    await page.goto('/audit');
    const row = page.locator('tbody tr').filter({ hasText: 'hist.audit' }).first();
    assert.equal((await row.locator('del').first().textContent()).trim(), '300 per minute');
    assert.equal((await row.locator('ins').first().textContent()).trim(), '12 per minute');
    // The key made by the harness is shown by its label, never its id.
    assert.ok((await page.locator('tbody').textContent()).includes('API key e2e'));

    const apps = page.getByLabel('Application', { exact: true });
    assert.ok((await optionValues(apps)).includes(APP.slug));
    await apps.selectOption(APP.slug);
    await page.getByLabel('Policy', { exact: true }).selectOption('hist.audit');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL((u) => u.pathname === '/audit' && u.searchParams.get('policy') === 'hist.audit');
    assert.equal(await page.locator('tbody tr').count(), 2, 'created and changed');
    await screenshots(page, 'audit-filtered');

    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Download as CSV' }).click(),
    ]);
    assert.match(download.suggestedFilename(), /^audit-shop-hist\.audit\.csv$/);
    const csv = await readFile(await download.path(), 'utf8');
    const lines = csv.split('\r\n');
    assert.equal(lines[0], 'time (UTC),user,application,entity type,entity,action,changes,before (JSON),after (JSON),source,change set');
    assert.equal(lines.filter((l) => l.includes(',hist.audit,')).length, 2, csv);
    assert.ok(csv.includes('rate: 300 per minute → 12 per minute'), csv);
    assert.equal(pathname(page), '/audit');
  });
});
