// Browser tests of an application's lifecycle: API keys shown once after a redirect
// (reloading neither makes another nor shows it again), rotated and expired; personal
// access tokens made and revoked on the account page; an application renamed and
// deleted; the last-owner guard (refused for an owner, confirmed by an admin); and a
// viewer who sees none of these controls. Run with scripts/e2e.sh.

import assert from 'node:assert/strict';
import http from 'node:http';

import { APP, USERS, pollUntil, screenshots } from './harness.mjs';
import { assertAccessible, consoleSuite, env, newPage, nextFormPost, pathname, signInOk, uiTest } from './ui.mjs';

/** Submits the form holding `button` and waits for the page it ends on; the POST's answer. */
async function submitVia(page, button) {
  const [post] = await Promise.all([nextFormPost(page), button.click()]);
  await page.waitForLoadState();
  return post;
}

/** An application of its own for a test, owned by olivia. */
async function appOwnedByOlivia(slug) {
  await env.server.api('POST', '/api/v1/apps', { slug, name: `App ${slug}` }, 201);
  await env.server.api('PUT', `/api/v1/apps/${slug}/members/olivia`, { role: 'owner' }, 200);
}

async function acquireWith(key) {
  const r = await fetch(env.server.url('/v1/acquire'), {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ resource: 'lifecycle.test', permits: 1 }),
  });
  return { status: r.status, body: await r.json() };
}

consoleSuite('lifecycle', () => {
  uiTest('owner: a key is shown once after the redirect, rotated, and the old one expires', async () => {
    await env.server.api(
      'POST',
      '/api/v1/policies',
      { name: 'lifecycle.test', owner_app: APP.slug, rate: 100, max_permits: 100 },
      201,
    );
    const page = await newPage();
    await signInOk(page, USERS.olivia);
    await page.goto(`/apps/${APP.slug}`);
    const keys = page.locator('section#keys');
    await keys.getByLabel('Label', { exact: true }).fill('e2e key');
    assert.equal(await keys.getByLabel('Expires (UTC, optional)').getAttribute('type'), 'datetime-local');
    const post = await submitVia(page, keys.getByRole('button', { name: 'Create key' }));
    assert.equal(post.status(), 303, 'creating a key redirects');
    assert.equal(pathname(page), `/apps/${APP.slug}`);
    const shown = (await page.locator('#new-key code').innerText()).trim();
    assert.match(shown, /^rk_key_/);
    assert.ok(!page.url().includes(shown), 'the key is never in the URL');
    await screenshots(page, 'lifecycle-new-key');
    assert.equal((await acquireWith(shown)).status, 200);

    // A reload neither shows it again nor makes a second key.
    const rowsBefore = await keys.locator('tbody tr').count();
    await page.reload();
    assert.equal(await page.locator('#new-key').count(), 0, 'the key is shown once');
    assert.equal(await keys.locator('tbody tr').count(), rowsBefore, 'a reload made no key');

    // Rotate, stopping the old key now: a new key is shown, the old one answers 401.
    const row = keys.locator('tbody tr').filter({ hasText: 'e2e key' }).first();
    await row.getByLabel('Old key works').selectOption('now');
    await submitVia(page, row.getByRole('button', { name: 'Rotate' }));
    const rotated = (await page.locator('#new-key code').innerText()).trim();
    assert.notEqual(rotated, shown);
    assert.equal((await acquireWith(rotated)).status, 200);
    const refused = await acquireWith(shown);
    assert.equal(refused.status, 401);
    assert.match(refused.body.detail, /expired/);
    assert.ok((await keys.innerText()).includes('expired'), 'the table shows the expiry');
    await screenshots(page, 'lifecycle-rotated');
  });

  uiTest('owner: a personal access token is made, shown once, and revoked', async () => {
    const page = await newPage();
    page.on('dialog', (d) => d.accept());
    await signInOk(page, USERS.olivia);
    await page.goto('/account');
    const tokens = page.locator('section#tokens');
    await tokens.getByLabel('Label', { exact: true }).fill('e2e token');
    await submitVia(page, tokens.getByRole('button', { name: 'Create token' }));
    assert.equal(pathname(page), '/account');
    const token = (await page.locator('#new-token code').innerText()).trim();
    assert.match(token, /^rk_pat_/);
    const asOlivia = () => fetch(env.server.url('/api/v1/apps'), { headers: { authorization: `Bearer ${token}` } });
    assert.equal((await asOlivia()).status, 200);
    await screenshots(page, 'lifecycle-account-token');
    await page.reload();
    assert.equal(await page.locator('#new-token').count(), 0);
    const row = tokens.locator('tbody tr').filter({ hasText: 'e2e token' });
    await submitVia(page, row.getByRole('button', { name: 'Revoke' }));
    assert.equal(await tokens.locator('tbody tr').filter({ hasText: 'e2e token' }).count(), 0);
    assert.equal((await asOlivia()).status, 401);
  });

  uiTest('owner: adds a webhook, sees its secret once, and reads a delivery in the log', async () => {
    const got = [];
    const receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        got.push({ headers: req.headers, body: JSON.parse(body) });
        res.end('ok');
      });
    });
    await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${receiver.address().port}/hooks`;
      const page = await newPage();
      await signInOk(page, USERS.olivia);
      await page.goto(`/apps/${APP.slug}`);
      await page.locator('#webhooks-link').click();
      assert.equal(pathname(page), `/apps/${APP.slug}/webhooks`);
      const form = page.locator('section#new-webhook');
      await form.getByLabel('Receiver URL').fill(url);
      await form.getByLabel(/policy\.changed/).check();
      await submitVia(page, form.getByRole('button', { name: 'Add webhook' }));
      const secret = (await page.locator('#new-secret code').innerText()).trim();
      assert.match(secret, /^whsec_/);

      await env.server.api('POST', '/api/v1/policies', { name: 'hooked.policy', owner_app: APP.slug, rate: 1, max_permits: 5 }, 201);
      await pollUntil('the receiver to get the change', () => got.length > 0, { timeoutMs: 30_000 });
      assert.equal(got[0].body.type, 'policy.changed');
      assert.match(got[0].headers['webhook-signature'], /^v1,/);
      await pollUntil(
        'the log to show the attempt',
        async () => {
          await page.reload();
          return (await page.locator('li[data-attempt="1"]').count()) > 0;
        },
        { timeoutMs: 30_000 },
      );
      assert.equal(await page.locator('#new-secret').count(), 0, 'the secret is shown once');
      assert.match(await page.locator('table.deliveries').innerText(), /policy\.changed[\s\S]*delivered[\s\S]*200/);
      await assertAccessible(page, 'webhooks with a delivery');
      await screenshots(page, 'webhooks-log');
    } finally {
      await new Promise((resolve) => receiver.close(resolve));
    }
  });

  uiTest('owner: renames an application, is stopped as its last owner, then deletes it', async () => {
    await appOwnedByOlivia('blog');
    const page = await newPage();
    await signInOk(page, USERS.olivia);
    await page.goto('/apps/blog');
    const settings = page.locator('section#settings');
    await settings.getByLabel('Slug').fill('journal');
    await settings.getByLabel('Name').fill('The journal');
    await submitVia(page, settings.getByRole('button', { name: 'Save settings' }));
    assert.equal(pathname(page), '/apps/journal');
    assert.equal((await page.locator('h1').first().innerText()).trim(), 'The journal');

    // The last owner cannot demote herself.
    const members = page.locator('section#members');
    const mine = members.locator('tr[data-member="olivia"]');
    await mine.getByLabel('Role of olivia').selectOption('viewer');
    const post = await submitVia(page, mine.getByRole('button', { name: 'Set role' }));
    assert.equal(post.status(), 409);
    assert.match(await page.locator('#members [role=alert]').innerText(), /make someone else owner first/);
    await screenshots(page, 'lifecycle-last-owner');

    // Delete asks on a page of its own, then the application is gone.
    await page.getByRole('link', { name: 'Delete application…' }).click();
    await page.waitForURL((u) => u.pathname === '/apps/journal/delete');
    await screenshots(page, 'lifecycle-delete');
    await submitVia(page, page.getByRole('button', { name: 'Delete application' }));
    assert.equal(pathname(page), '/apps');
    assert.equal(await page.locator('a[href="/apps/journal"]').count(), 0);
  });

  uiTest('viewer: sees no settings, key or member controls, and cannot open delete', async () => {
    const page = await newPage();
    await signInOk(page, USERS.victor);
    await page.goto(`/apps/${APP.slug}`);
    assert.equal(await page.locator('section#settings').count(), 0);
    assert.equal(await page.getByRole('button', { name: 'Rotate' }).count(), 0);
    const posts = await page.locator('form[method=post]').evaluateAll((fs) => fs.map((f) => f.id));
    assert.deepEqual(posts, ['logout'], 'a viewer gets no form but sign-out');
    const resp = await page.goto(`/apps/${APP.slug}/delete`);
    assert.equal(resp.status(), 403);
    // The webhooks and their log, read-only.
    await page.goto(`/apps/${APP.slug}/webhooks`);
    assert.equal(await page.locator('#read-only').count(), 1);
    const hookForms = await page.locator('form[method=post]').evaluateAll((fs) => fs.map((f) => f.id));
    assert.deepEqual(hookForms, ['logout'], 'a viewer gets no webhook form');
    assert.ok((await page.locator('table.deliveries').count()) > 0, 'the log is there to read');
    await assertAccessible(page, 'webhooks as viewer');
    await screenshots(page, 'webhooks-viewer');
  });

  uiTest('admin: confirms before leaving an application without an owner', async () => {
    await appOwnedByOlivia('wiki');
    const page = await newPage();
    page.on('dialog', (d) => d.accept());
    await signInOk(page, USERS.root);
    await page.goto('/apps/wiki');
    const row = page.locator('section#members tr[data-member="olivia"]');
    const post = await submitVia(page, row.getByRole('button', { name: 'Remove' }));
    assert.equal(post.status(), 409);
    assert.match(await page.locator('h1').first().innerText(), /without an owner\?/);
    await screenshots(page, 'lifecycle-confirm-ownerless');
    await submitVia(page, page.getByRole('button', { name: 'Yes, leave it without an owner' }));
    assert.equal(pathname(page), '/apps/wiki');
    const wiki = await env.server.api('GET', '/api/v1/apps/wiki', undefined, 200);
    assert.deepEqual(wiki.members, []);
  });
});
