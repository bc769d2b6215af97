// Policy files in headless Chromium (see harness.mjs): an owner downloads shop's
// policies as a file from the application's page, reads a changed file into the apply
// form from their computer, reads the plan (on a desktop and on a phone), applies it
// and sees what was applied; every page visited passes axe-core, light and dark.
// Without scripts, a file pasted into the form is planned the same way.

import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

import { APP, USERS, screenshots } from './harness.mjs';
import { assertAccessible, consoleSuite, env, newPage, nextFormPost, pathname, signInOk, uiTest } from './ui.mjs';

async function accessibleInBothSchemes(page, what) {
  for (const colorScheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme });
    await assertAccessible(page, `${what} (${colorScheme})`);
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

// Editing a YAML policy file by its lines: a policy is its `- name: NAME` line and the
// lines indented deeper below it.

/** [first line, line after the last] of the policy `name` in `lines`, and its indent. */
function policyLines(lines, name) {
  const start = lines.findIndex((l) => l.trim() === `- name: ${name}`);
  assert.ok(start >= 0, `no policy ${name} in:\n${lines.join('\n')}`);
  const indent = lines[start].indexOf('-');
  let end = start + 1;
  while (end < lines.length && lines[end].search(/\S/) > indent) end += 1;
  return { start, end, indent };
}

function withRate(yaml, name, rate) {
  const lines = yaml.split('\n');
  const { start, end } = policyLines(lines, name);
  const at = lines.slice(start, end).findIndex((l) => /^\s+rate: /.test(l)) + start;
  assert.ok(at >= start, `${name} has no rate`);
  lines[at] = lines[at].replace(/rate: .*/, `rate: ${rate}`);
  return lines.join('\n');
}

function withoutPolicy(yaml, name) {
  const lines = yaml.split('\n');
  const { start, end } = policyLines(lines, name);
  lines.splice(start, end - start);
  return lines.join('\n');
}

/** `name` with `fields` appended as the last policy of the (last) document. */
function addPolicy(yaml, name, fields) {
  const lines = yaml.split('\n');
  const indent = lines.find((l) => l.trim().startsWith('- name: ')).indexOf('-');
  const pad = ' '.repeat(indent);
  const added = [`${pad}- name: ${name}`, ...fields.map((f) => `${pad}  ${f}`)].join('\n');
  return `${yaml.replace(/\n*$/, '')}\n${added}\n`;
}

consoleSuite('policy files', () => {
  uiTest('an owner downloads, plans and applies a policy file', async () => {
    for (const name of ['files.search', 'files.old']) {
      await env.server.api('POST', '/api/v1/policies', { name, owner_app: APP.slug, rate: 10, max_permits: 20 }, 201);
    }
    const page = await newPage();
    await signInOk(page, USERS.olivia);
    await page.goto(`/apps/${APP.slug}`);

    // Download as file: the API's export of shop.
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Download as file' }).click(),
    ]);
    assert.equal(download.suggestedFilename(), `${APP.slug}-policies.yaml`);
    const downloaded = await readFile(await download.path(), 'utf8');
    const exported = await env.server.api('GET', `/api/v1/export?app=${APP.slug}`, undefined, 200);
    assert.equal(downloaded, exported);
    assert.match(downloaded, /name: files\.search/);

    // The file changed as a person would: search at 120/min, old left out, a new policy.
    const changed = addPolicy(
      withoutPolicy(withRate(downloaded, 'files.search', '120/min'), 'files.old'),
      'files.pings',
      ['rate: 1/min', 'max_permits: 1'],
    );
    const file = path.join(env.server.dir, 'changed.yaml');
    await writeFile(file, changed);

    await page.getByRole('link', { name: 'Apply a policy file' }).click();
    await page.waitForURL((u) => u.pathname === '/policy-files/apply');
    await accessibleInBothSchemes(page, 'the apply form');
    // The script shows the file chooser, and reads the file into the text box.
    await page.getByLabel('Read a file from your computer').setInputFiles(file);
    await page.waitForFunction(() => document.getElementById('policy-file').value.includes('files.pings'));
    assert.equal(await page.getByLabel('Policy file').inputValue(), changed);
    await page.getByLabel(/^Prune/).check();
    const [planned] = await Promise.all([nextFormPost(page), page.getByRole('button', { name: 'Show the plan' }).click()]);
    assert.equal(planned.status(), 200);
    await page.locator('#plan').waitFor();

    const action = (name) => page.locator(`#plan li[data-policy="${name}"]`).getAttribute('data-action');
    assert.equal(await action('files.search'), 'update');
    assert.equal(await action('files.pings'), 'create');
    assert.equal(await action('files.old'), 'delete');
    const search = (await page.locator('#plan li[data-policy="files.search"]').textContent()).replace(/\s+/g, ' ');
    assert.match(search, /rate: 600\/min → (becomes )?120\/min/);
    assert.match(await page.locator('#plan-summary').textContent(), /Plan: 1 to create, 1 to update, 1 to delete/);
    // Nothing changed yet.
    assert.equal((await env.server.api('GET', '/api/v1/policies/files.old')).status, 200);
    await accessibleInBothSchemes(page, 'the plan');
    await screenshots(page, 'policy-file-plan');

    const [applied] = await Promise.all([
      nextFormPost(page),
      page.getByRole('button', { name: 'Apply these changes' }).click(),
    ]);
    assert.equal(applied.status(), 303);
    await page.waitForURL((u) => u.pathname === '/policy-files/apply');
    assert.match(
      await page.locator('[role=status]').textContent(),
      /Applied: 1 created, 1 updated, 1 deleted, \d+ unchanged\./,
    );
    await accessibleInBothSchemes(page, 'the applied note');
    await screenshots(page, 'policy-file-applied');
    const pings = await env.server.api('GET', '/api/v1/policies/files.pings', undefined, 200);
    assert.equal(pings.max_permits, 1);
    assert.equal((await env.server.api('GET', '/api/v1/policies/files.old')).status, 404);
    assert.equal(pathname(page), '/policy-files/apply');
  });

  uiTest('without JavaScript: no file chooser, a pasted file is planned', async () => {
    const page = await newPage(undefined, { javaScriptEnabled: false });
    await signInOk(page, USERS.olivia);
    await page.goto('/policy-files/apply');
    assert.equal(await page.getByLabel('Read a file from your computer').isVisible(), false);
    await page.getByLabel('Policy file').fill(`app: ${APP.slug}\npolicies:\n  - name: files.nojs\n    rate: 2/s\n    max_permits: 2\n`);
    const [planned] = await Promise.all([nextFormPost(page), page.getByRole('button', { name: 'Show the plan' }).click()]);
    assert.equal(planned.status(), 200);
    assert.equal(await page.locator('#plan li[data-policy="files.nojs"]').getAttribute('data-action'), 'create');
    assert.equal((await env.server.api('GET', '/api/v1/policies/files.nojs')).status, 404, 'planned, not made');
  });
});
