// Browser tests of signing in through an OpenID Provider: npm's oidc-provider (a
// certified implementation) runs in this process with its development login and consent
// pages, and the server under test is started with RATEKEEPER_OIDC_* pointing at it.
// Headless Chromium signs in there and comes back; every bad return is refused with the
// sign-in page saying why: a state not begun here (forged, or replayed), a token expired,
// a token signed by a key the provider does not publish, a disabled user.
// Run with scripts/e2e.sh.

import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import { after, afterEach, before, describe } from 'node:test';

import Provider from 'oidc-provider';

import { Server, launchBrowser, screenshots } from './harness.mjs';
import { TEST_TIMEOUT_MS, assertAccessible, env, newPage, pathname, uiTest } from './ui.mjs';

const CLIENT_ID = 'ratekeeper-e2e';
const CLIENT_SECRET = 'a client secret of the e2e tests';
const ADMINS = 'rk-admins';

/** The provider's signing key, as a private JWK. */
function signingKey(kid) {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { ...privateKey.export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' };
}

/** The public half of a JWK set. */
const published = (keys) => ({ keys: keys.map(({ d: _d, ...pub }) => pub) });

/**
 * The provider on a loopback port. Its URL must be known before the server starts, and the
 * server's before the provider is made (its client's redirect URI): the port is bound first
 * and the provider answers on it once made. `tamper` changes what it answers for the test.
 */
const idp = {
  handler: null,
  /** The provider as made at the start, and its key. */
  original: null,
  key: null,
  /** A JWK set served instead of the provider's own. */
  jwks: null,
  /** Milliseconds the provider's clock is moved by while it answers the token endpoint. */
  tokenClockShiftMs: 0,
  server: null,
  issuer: null,
};

function idpRequest(req, res) {
  if (idp.jwks && req.url === '/jwks') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(idp.jwks));
    return;
  }
  if (idp.tokenClockShiftMs && req.url === '/token') {
    // The token is issued as if two hours ago: its exp is past when it arrives.
    const realNow = Date.now;
    const shift = idp.tokenClockShiftMs;
    Date.now = () => realNow() + shift;
    res.on('close', () => {
      Date.now = realNow;
    });
  }
  if (!idp.handler) {
    res.statusCode = 503;
    res.end();
    return;
  }
  idp.handler(req, res);
}

/** An OpenID Provider for ratekeeper's client at `redirectUri`, signing with `key`. */
function makeProvider(redirectUri, key) {
  const provider = new Provider(idp.issuer, {
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
        id_token_signed_response_alg: 'ES256',
      },
    ],
    jwks: { keys: [key] },
    features: { devInteractions: { enabled: true } },
    claims: { openid: ['sub'], profile: ['preferred_username', 'groups'] },
    // The profile claims in the ID token itself, which is all ratekeeper reads.
    conformIdTokenClaims: false,
    // The login typed on the development page is the account: "dana" is in the admins'
    // group, anyone else in none.
    findAccount: async (_ctx, id) => ({
      accountId: id,
      claims: async () => ({ sub: `idp-${id}`, preferred_username: id, groups: id === 'dana' ? [ADMINS] : [] }),
    }),
  });
  return provider.callback();
}

/** Clicks "Sign in with Acme SSO" on /login, signs in at the provider as `login`, consents. */
async function signInAtProvider(page, login, { next } = {}) {
  await page.goto(next ? `/login?next=${encodeURIComponent(next)}` : '/login');
  await page.getByRole('link', { name: 'Sign in with Acme SSO' }).click();
  await page.waitForURL((url) => url.origin === idp.issuer);
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill('any password: the development page takes any');
  const callback = page.waitForRequest((r) => r.url().startsWith(env.server.url('/login/oidc/callback')));
  await page.getByRole('button', { name: 'Sign-in' }).click();
  // The consent page, when the provider asks (a new session, a new grant).
  const consent = page.getByRole('button', { name: 'Continue' });
  const first = await Promise.race([
    callback.then(() => 'back'),
    consent.waitFor().then(() => 'consent', () => 'none'),
  ]);
  if (first === 'consent') await consent.click();
  const request = await callback;
  await page.waitForLoadState();
  return request.url();
}

/** The alert the sign-in page shows. */
const alertOf = (page) => page.locator('[role="alert"]').innerText();

describe('oidc', { timeout: 20 * TEST_TIMEOUT_MS }, () => {
  before(async () => {
    idp.server = http.createServer(idpRequest);
    await new Promise((resolve) => idp.server.listen(0, '127.0.0.1', resolve));
    idp.issuer = `http://127.0.0.1:${idp.server.address().port}`;
    env.server = new Server();
    Object.assign(env.server.env, {
      RATEKEEPER_OIDC_ISSUER: idp.issuer,
      RATEKEEPER_OIDC_CLIENT_ID: CLIENT_ID,
      RATEKEEPER_OIDC_CLIENT_SECRET: CLIENT_SECRET,
      RATEKEEPER_OIDC_NAME: 'Acme SSO',
      RATEKEEPER_OIDC_ADMIN_GROUP: ADMINS,
    });
    await env.server.start();
    idp.key = signingKey('idp-1');
    idp.original = makeProvider(env.server.url('/login/oidc/callback'), idp.key);
    idp.handler = idp.original;
    env.browser = await launchBrowser();
  });

  afterEach(() => {
    idp.handler = idp.original;
    idp.jwks = null;
    idp.tokenClockShiftMs = 0;
  });

  after(async () => {
    await env.browser?.close();
    const status = await env.server?.stop();
    await new Promise((resolve) => idp.server.close(resolve));
    if (status) assert.equal(status.code, 0, `server exited with ${JSON.stringify(status)}\n${env.server.logTail()}`);
  });

  uiTest('the sign-in page offers the provider beside the password, and passes axe-core', async () => {
    const page = await newPage();
    await page.goto('/login');
    assert.equal(await page.getByRole('link', { name: 'Sign in with Acme SSO' }).count(), 1);
    assert.equal(await page.locator('#login-form').count(), 1);
    await assertAccessible(page, '/login with single sign-on');
    await screenshots(page, 'login-oidc');
  });

  uiTest('a person signs in at the provider, comes back signed in, and its group makes them admin', async () => {
    const page = await newPage();
    await signInAtProvider(page, 'dana', { next: '/users' });
    assert.equal(pathname(page), '/users');
    assert.equal(await page.locator('tr[data-user="dana"]').count(), 1, 'made at the first sign-in');
    // Signing out ends the ratekeeper session.
    await page.locator('#logout button, form[action="/logout"] button').first().click();
    await page.waitForURL((url) => url.pathname === '/login');
    const again = await page.goto('/users');
    assert.equal(pathname(page), '/login', `after sign-out /users answered ${again.status()}`);
  });

  uiTest('a return this server did not begin, or a second time, is refused saying so', async () => {
    const page = await newPage();
    const forged = await page.goto('/login/oidc/callback?code=made-up&state=forged');
    assert.equal(forged.status(), 400);
    assert.match(await alertOf(page), /not begun here/);
    await screenshots(page, 'login-oidc-refused');

    const returned = await signInAtProvider(await newPage(), 'olga');
    const replay = await newPage();
    const answer = await replay.goto(returned);
    assert.equal(answer.status(), 400);
    assert.match(await alertOf(replay), /not begun here, was already used/);
  });

  uiTest('an expired token is refused saying it expired', async () => {
    idp.tokenClockShiftMs = -2 * 3600 * 1000;
    const page = await newPage();
    await signInAtProvider(page, 'erin');
    assert.equal(pathname(page), '/login/oidc/callback');
    assert.match(await alertOf(page), /expired/);
  });

  uiTest('a token signed by a key the provider does not publish is refused', async () => {
    const callback = env.server.url('/login/oidc/callback');
    // Signed by another key under the name of the provider's: its signature does not match.
    idp.handler = makeProvider(callback, signingKey('idp-1'));
    const page = await newPage();
    await signInAtProvider(page, 'erin');
    assert.match(await alertOf(page), /signature does not match the provider's key/);
    // Signed by a key of another name, which the provider's key set (read again) lacks.
    idp.handler = makeProvider(callback, signingKey('idp-2'));
    idp.jwks = published([idp.key]);
    const other = await newPage();
    await signInAtProvider(other, 'erin');
    assert.match(await alertOf(other), /publishes no key named "idp-2"/);
    // The provider's own tokens sign people in again.
    idp.handler = idp.original;
    idp.jwks = null;
    const next = await newPage();
    await signInAtProvider(next, 'erin');
    assert.equal(pathname(next), '/apps');
  });

  uiTest('a disabled user is refused at their next sign-in', async () => {
    const erin = await newPage();
    await signInAtProvider(erin, 'frank');
    assert.equal(pathname(erin), '/apps');
    // dana, an admin through the provider's group, disables frank.
    const admin = await newPage();
    await signInAtProvider(admin, 'dana', { next: '/users' });
    const row = admin.locator('tr[data-user="frank"]');
    await row.getByLabel('disabled').check();
    await Promise.all([admin.waitForLoadState(), row.getByRole('button', { name: 'Save' }).click()]);
    await admin.locator('tr[data-user="frank"] strong.warn').waitFor();

    const later = await newPage();
    await signInAtProvider(later, 'frank');
    assert.match(await alertOf(later), /frank is disabled/);
  });
});
