// A client of the TypeScript SDK 1.x (the 2025-11-25 revision) against the
// stdio server, which the conformance suite cannot drive: the handshake, a
// write read back, a completion and a missing resource.
// Usage: node conformance-stdio.cjs NODE_MODULES BINARY WORKDIR
const { createRequire } = require('node:module');
const [modules, binary, dir] = process.argv.slice(2);
const sdk = createRequire(modules + '/');
const { Client } = sdk('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = sdk('@modelcontextprotocol/sdk/client/stdio.js');

function fail(msg) {
  console.error(`stdio client: ${msg}`);
  process.exit(1);
}

(async () => {
  const client = new Client({ name: 'ci-stdio', version: '1' });
  await client.connect(new StdioClientTransport({
    command: binary,
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: dir, PROMETHEUS_MEMORY_DB_PATH: `${dir}/stdio.db`, PROMETHEUS_WORKSPACE_ROOT: dir },
  }));
  const { tools } = await client.listTools();
  if (!tools.some((t) => t.name === 'memory_write')) fail('no memory_write in tools/list');
  await client.callTool({ name: 'memory_write', arguments: { type: 'semantic', scope: 'project', key: 'ci-stdio', body: 'written over stdio' } });
  const read = await client.callTool({ name: 'memory_read', arguments: { key: 'ci-stdio' } });
  if (read.isError || !JSON.stringify(read.structuredContent).includes('written over stdio')) fail(`read back: ${JSON.stringify(read)}`);
  const done = await client.complete({ ref: { type: 'ref/resource', uri: 'memory://{scope}/{type}/{key}' }, argument: { name: 'key', value: 'ci-' } });
  if (!done.completion.values.includes('ci-stdio')) fail(`completion: ${JSON.stringify(done)}`);
  const err = await client.readResource({ uri: 'memory://project/semantic/missing' }).then(() => null, (e) => e);
  if (!err || err.code !== -32602) fail(`a missing resource: ${err}`);
  await client.close();
  console.log('stdio: a TypeScript SDK 1.x client passes');
})().catch((e) => fail(e.stack || String(e)));
