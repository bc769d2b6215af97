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
