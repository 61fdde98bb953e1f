// A real OpenID provider for the tests (tests/oidc_provider.py starts it): node's
// oidc-provider, an OpenID Certified implementation, on loopback with an in-memory store.
//
// Usage: node provider.mjs CONFIG.json; prints "listening" once it serves. CONFIG holds:
//   issuer      http://127.0.0.1:PORT (the port it listens on)
//   resource    the API's identifier: access tokens default to it as their audience
//   jwks        its private signing keys ({"keys": [JWK, ...]}; the first one signs)
//   clients     oidc-provider client metadata (client credentials, or code + PKCE)
//   groups      groups of each client (client credentials) and of each account (sign-in)
//   ttl         seconds an access token lives
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const groupsOf = (id) => config.groups[id] ?? [];

const provider = new Provider(config.issuer, {
  clients: config.clients,
  jwks: config.jwks,
  pkce: { required: () => true },
  // Scope claims in the ID token itself (groups), as Keycloak, Okta and Entra put them.
  conformIdTokenClaims: false,
  claims: { openid: ['sub'], groups: ['groups'], profile: ['name'] },
  findAccount: (ctx, id) => ({
    accountId: id,
    claims: () => ({ sub: id, name: id, groups: groupsOf(id) }),
  }),
  // RFC 9068 JWT access tokens carry the caller's groups: an account's when a person
  // signed in, the client's own for client credentials.
  extraTokenClaims: (ctx, token) => ({ groups: groupsOf(token.accountId ?? token.clientId) }),
  features: {
    devInteractions: { enabled: true }, // its own sign-in form: any login, any password
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => config.resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => ({
        scope: 'api',
        audience: resource,
        accessTokenTTL: config.ttl,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
});
provider.proxy = false;
const port = Number(new URL(config.issuer).port);
provider.listen(port, '127.0.0.1', () => console.log('listening'));
