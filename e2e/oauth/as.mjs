// The local authorization server and MCP resource of server/oauth's tests: the MCP TypeScript
// SDK's example OAuth provider (DemoInMemoryAuthProvider: dynamic registration, PKCE S256, the
// resource parameter checked) and its auth router, extended with what the demo leaves out and
// the tests need — refresh tokens, the RFC 9207 iss parameter (advertised in the metadata), a
// short token life — and an MCP server (stateless streamable HTTP) behind requireBearerAuth.
// Listens on 127.0.0.1 only, on ports the kernel picks, and prints {"as":…, "mcp":…} once ready.
// POST /test/config {iss: "right"|"wrong"|"none", expiresIn} on the AS changes its behaviour;
// GET /test/log tells what it was asked (the resource of each request, the grants).
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import express from 'express';
import { DemoInMemoryAuthProvider } from '@modelcontextprotocol/sdk/examples/server/demoInMemoryOAuthProvider.js';
import { mcpAuthRouter, createOAuthMetadata, mcpAuthMetadataRouter, getOAuthProtectedResourceMetadataUrl } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

const listen = () => new Promise(res => { const s = http.createServer(); s.listen(0, '127.0.0.1', () => res(s)); });
const asSrv = await listen(), rsSrv = await listen();
const asURL = new URL(`http://127.0.0.1:${asSrv.address().port}/`);
const mcpURL = new URL(`http://127.0.0.1:${rsSrv.address().port}/mcp`);

const cfg = { iss: 'right', expiresIn: 3600 };
const log = { authorize: [], token: [], refreshTokens: new Map() };

class Provider extends DemoInMemoryAuthProvider {
  async authorize(client, params, res) {
    log.authorize.push({ resource: params.resource?.href ?? null, redirectUri: params.redirectUri });
    const code = randomUUID();
    this.codes.set(code, { client, params });
    if (!client.redirect_uris.includes(params.redirectUri)) { res.status(400).send('Unregistered redirect_uri'); return; }
    const u = new URL(params.redirectUri);
    u.searchParams.set('code', code);
    if (params.state !== undefined) u.searchParams.set('state', params.state);
    if (cfg.iss === 'right') u.searchParams.set('iss', asURL.href);
    if (cfg.iss === 'wrong') u.searchParams.set('iss', 'https://evil.example/');
    res.redirect(u.toString());
  }
  issue(clientId, scopes, resource) {
    const token = randomUUID(), refresh = randomUUID();
    this.tokens.set(token, { token, clientId, scopes, expiresAt: Date.now() + cfg.expiresIn * 1000, resource, type: 'access' });
    log.refreshTokens.set(refresh, { clientId, scopes, resource });
    return { access_token: token, token_type: 'bearer', expires_in: cfg.expiresIn, refresh_token: refresh, scope: scopes.join(' ') };
  }
  async exchangeAuthorizationCode(client, code, verifier, redirectUri, resource) {
    const t = await super.exchangeAuthorizationCode(client, code, verifier, redirectUri, resource);
    const data = this.tokens.get(t.access_token);
    this.tokens.delete(t.access_token);
    log.token.push({ grant: 'authorization_code', resource: resource?.href ?? null });
    return this.issue(client.client_id, data.scopes, data.resource);
  }
  async exchangeRefreshToken(client, refreshToken, scopes, resource) {
    log.token.push({ grant: 'refresh_token', resource: resource?.href ?? null });
    const r = log.refreshTokens.get(refreshToken);
    if (!r || r.clientId !== client.client_id) throw new Error('Invalid refresh token');
    if (!resource || resource.href !== mcpURL.href) throw new Error('Invalid resource');
    log.refreshTokens.delete(refreshToken); // rotated
    return this.issue(client.client_id, r.scopes, r.resource);
  }
}
const provider = new Provider(resource => resource?.href === mcpURL.href);
const metadata = () => ({ ...createOAuthMetadata({ provider, issuerUrl: asURL, scopesSupported: ['mcp:tools'] }), authorization_response_iss_parameter_supported: true });

const as = express();
as.use(express.json());
as.get(['/.well-known/oauth-authorization-server', '/.well-known/oauth-authorization-server/'], (req, res) => res.json(metadata()));
as.post('/test/config', (req, res) => { Object.assign(cfg, req.body); res.json(cfg); });
as.get('/test/log', (req, res) => res.json({ authorize: log.authorize, token: log.token }));
as.use(mcpAuthRouter({ provider, issuerUrl: asURL, scopesSupported: ['mcp:tools'] }));
asSrv.on('request', as);

const rs = express();
rs.use(express.json());
rs.use(mcpAuthMetadataRouter({ oauthMetadata: metadata(), resourceServerUrl: mcpURL, scopesSupported: ['mcp:tools'] }));
rs.post('/mcp', requireBearerAuth({ verifier: provider, resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(mcpURL) }), async (req, res) => {
  const server = new McpServer({ name: 'oauth-test', version: '1.0.0' });
  server.registerTool('whoami', { description: 'Names the OAuth client of the token', inputSchema: {} }, async (_args, extra) => ({
    content: [{ type: 'text', text: `client ${extra.authInfo?.clientId}` }],
  }));
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on('close', () => { transport.close(); server.close(); });
  await server.connect(transport);
  await transport.handleRequest(req, res, req.body);
});
rsSrv.on('request', rs);

console.log(JSON.stringify({ as: asURL.href, mcp: mcpURL.href }));
process.stdin.on('end', () => process.exit(0)); // the test closes stdin to stop it
process.stdin.resume();
