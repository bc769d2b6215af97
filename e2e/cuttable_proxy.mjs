// A TCP proxy whose connections can be cut (and new ones refused) and then let through
// again: Redis going away and coming back, as one server behind the proxy sees it while
// the others keep reaching Redis directly.

import net from 'node:net';

/** Starts a proxy on a free loopback port to `host:port`. */
export async function cuttableProxy(host, port) {
  const open = new Set();
  let passing = true;
  const server = net.createServer((client) => {
    if (!passing) {
      client.destroy();
      return;
    }
    const upstream = net.connect(port, host);
    open.add(client);
    open.add(upstream);
    const close = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    for (const socket of [client, upstream]) {
      socket.on('error', close);
      socket.on('close', close);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const cut = () => {
    passing = false;
    for (const socket of open) socket.destroy();
    open.clear();
  };
  return {
    port: server.address().port,
    cut,
    restore() {
      passing = true;
    },
    close() {
      cut();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * Another instance of `server`'s deployment whose Redis goes through a cuttable proxy:
 * it acquires `policy` once while Redis is reachable (200), then `refusals` times with the
 * proxy cut (each must be 503), and the proxy lets it through again. `whileUp` runs
 * before that instance stops (its counts land with its next flush, so wait for them
 * there). `redis` is `server.redisAddress()` (not a cluster).
 */
export async function refusedOnAnotherInstance(server, redis, policy, refusals, whileUp) {
  const proxy = await cuttableProxy(redis.host, redis.port);
  const other = await server.startInstance(`redis://127.0.0.1:${proxy.port}${redis.path}`);
  try {
    const first = await other.acquire(policy);
    if (first.status !== 200) throw new Error(`with Redis reachable: ${first.status} ${JSON.stringify(first.body)}`);
    proxy.cut();
    for (let i = 0; i < refusals; i++) {
      const refused = await other.acquire(policy);
      if (refused.status !== 503) throw new Error(`acquire ${i + 1} with Redis away: ${refused.status} ${JSON.stringify(refused.body)}`);
    }
    proxy.restore();
    await whileUp();
  } finally {
    await other.stop();
    await proxy.close();
  }
}
