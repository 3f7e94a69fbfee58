// The authorization server of tests/test_upstream_credentials.py: oidc-provider (npm, installed by
// .ci/oauth-server.sh), configured from a JSON file, on 127.0.0.1.
//
//   node oauth_server.mjs CONFIG.json
//   CONFIG: {port, clients: [{client_id, client_secret, token_endpoint_auth_method, scope, grant_types}],
//            resources: {URL: {scope: "scope1 scope2", ttl: SECONDS}}, default_resource}
//
// oidc-provider does the OAuth parts: client authentication (client_secret_basic / _post), the
// client_credentials grant, resource indicators (RFC 8707) giving JWT access tokens for each
// resource, scopes, error responses, the JWKS. RFC 8693 token exchange is a grant type it lets an
// application register (`registerGrantType`); the handler below checks the subject token (a JWT
// this server issued) and issues one for the requested audience with the subject's `sub`.
//
// GET /healthz answers once it listens; GET /test/stats answers what the server saw at its token endpoint (every request, its grant
// type, client, outcome, and the issued token's exp and sub): the tests count token requests
// here, at the server, not in the client under test.
import { readFileSync } from "node:fs";
import Provider, { errors } from "oidc-provider";
import * as jose from "jose";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const issuer = `http://127.0.0.1:${config.port}`;
const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";

const { privateKey, publicKey } = await jose.generateKeyPair("RS256", { extractable: true });
const kid = "test-key-1";
const privateJwk = { ...(await jose.exportJWK(privateKey)), kid, alg: "RS256", use: "sig" };
const publicJwks = jose.createLocalJWKSet({ keys: [{ ...(await jose.exportJWK(publicKey)), kid, alg: "RS256" }] });

const resources = config.resources;
const provider = new Provider(issuer, {
  clients: config.clients.map((c) => ({ redirect_uris: [], response_types: [], ...c })),
  jwks: { keys: [privateJwk] },
  scopes: [...new Set(Object.values(resources).flatMap((r) => r.scope.split(" ")))],
  features: {
    clientCredentials: { enabled: true },
    devInteractions: { enabled: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => config.default_resource,
      getResourceServerInfo: (_ctx, resource) => {
        if (!(resource in resources)) throw new errors.InvalidTarget(`unknown resource ${resource}`);
        return { scope: resources[resource].scope, accessTokenTTL: resources[resource].ttl, accessTokenFormat: "jwt",
                 jwt: { sign: { alg: "RS256" } } };
      },
    },
  },
});

// RFC 8693: a token for `audience` (or `resource`) standing for the subject token's subject.
async function tokenExchange(ctx) {
  const { subject_token: subject, subject_token_type: type, audience, resource, scope } = ctx.oidc.params;
  if (!subject) throw new errors.InvalidRequest("missing required parameter 'subject_token'");
  if (type !== ACCESS_TOKEN_TYPE) throw new errors.InvalidRequest(`unsupported subject_token_type ${type}`);
  let claims;
  try {
    ({ payload: claims } = await jose.jwtVerify(subject, publicJwks, { issuer }));
  } catch (e) {
    throw new errors.InvalidGrant(`subject_token is invalid (${e.code || e.message})`);
  }
  const target = audience || resource || config.default_resource;
  if (!(target in resources)) throw new errors.InvalidTarget(`unknown audience ${target}`);
  const held = new Set(String(claims.scope || "").split(" ").filter(Boolean));
  const allowed = new Set(resources[target].scope.split(" "));
  const wanted = scope ? scope.split(" ") : [...held];
  const granted = wanted.filter((s) => held.has(s) && allowed.has(s)).join(" ");
  const now = Math.floor(Date.now() / 1000);
  const token = await new jose.SignJWT({ scope: granted || undefined, client_id: ctx.oidc.client.clientId,
                                         act: { sub: ctx.oidc.client.clientId } })
    .setProtectedHeader({ alg: "RS256", kid, typ: "at+jwt" })
    .setIssuer(issuer).setSubject(String(claims.sub)).setAudience(target)
    .setIssuedAt(now).setExpirationTime(now + resources[target].ttl).setJti(crypto.randomUUID())
    .sign(privateKey);
  ctx.body = { access_token: token, issued_token_type: ACCESS_TOKEN_TYPE, token_type: "Bearer",
               expires_in: resources[target].ttl, ...(granted ? { scope: granted } : {}) };
}
provider.registerGrantType(TOKEN_EXCHANGE, tokenExchange,
  ["subject_token", "subject_token_type", "audience", "resource", "scope", "requested_token_type"]);

const seen = [];
provider.use(async (ctx, next) => {
  if (ctx.path === "/healthz") {
    ctx.body = { ok: true };
    return;
  }
  if (ctx.path === "/test/stats") {
    ctx.body = { requests: seen };
    return;
  }
  if (ctx.path !== "/token" || ctx.method !== "POST") return next();
  const entry = { at_ms: Date.now() };
  seen.push(entry);
  await next();
  const params = ctx.oidc?.params || {};
  Object.assign(entry, { status: ctx.status, grant_type: params.grant_type, client_id: ctx.oidc?.client?.clientId });
  const body = typeof ctx.body === "object" && ctx.body ? ctx.body : {};
  if (body.access_token) {
    const claims = jose.decodeJwt(body.access_token);
    Object.assign(entry, { exp: claims.exp, sub: claims.sub, aud: claims.aud, jti: claims.jti });
  } else {
    entry.error = body.error;
  }
});

provider.listen(config.port, "127.0.0.1", () => console.log(`listening ${issuer}`));
