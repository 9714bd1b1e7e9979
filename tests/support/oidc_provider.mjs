// A real OpenID Connect provider for the SSO tests (tests/support/oidc.py): the certified
// `oidc-provider` package, installed by local/test into .venv/node.
//
// node oidc_provider.mjs NODE_MODULES CONFIG.json — NODE_MODULES is where the package is
// installed (an ES module is not found through NODE_PATH); CONFIG holds the clients and the signing keys (private
// JWKs, the first signs). The provider listens on a free loopback port and prints
// `listening <issuer>` once. Its login and consent are automatic: the person is the
// `login_hint` the relying party sent. Two test controls, outside the OIDC surface:
//   POST /__rotate   the next key of CONFIG's `next_keys` signs from now on (the old one
//                    stays published), as a provider rotating its keys does
//   POST /__disable?email=a@b  the person may no longer sign in (a refresh is refused)
import { readFileSync } from "node:fs";
import http from "node:http";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const { default: Provider } = await import(
  pathToFileURL(join(process.argv[2], "oidc-provider", "lib", "index.js")).href
);
const config = JSON.parse(readFileSync(process.argv[3], "utf8"));
const disabled = new Set();
let keys = config.keys;
let provider;
let issuer;

function build() {
  const made = new Provider(issuer, {
    clients: config.clients,
    jwks: { keys },
    cookies: { keys: ["postbag-test-cookie-key"] },
    pkce: { required: () => true, methods: ["S256"] },
    scopes: ["openid", "email", "profile", "offline_access"],
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    features: { devInteractions: { enabled: false } },
    ttl: { IdToken: 300, AccessToken: 300, AuthorizationCode: 60, Interaction: 300, Session: 3600, Grant: 3600, RefreshToken: 3600 },
    issueRefreshToken: async (ctx, client) => client.grantTypeAllowed("refresh_token"),
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    findAccount: async (ctx, id) =>
      disabled.has(id)
        ? undefined
        : { accountId: id, claims: async () => ({ sub: id, email: id, email_verified: true, name: id }) },
  });
  made.proxy = false;
  return made;
}

async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  let result;
  if (details.prompt.name === "login") {
    const person = String(details.params.login_hint || "");
    result = { login: { accountId: person } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    grant.addOIDCScope(String(details.params.scope));
    result = { consent: { grantId: await grant.save() } };
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, issuer);
  try {
    if (req.method === "POST" && url.pathname === "/__rotate") {
      keys = [...config.next_keys.splice(0, 1), ...keys];
      provider = build();
      res.writeHead(204).end();
    } else if (req.method === "POST" && url.pathname === "/__disable") {
      disabled.add(url.searchParams.get("email"));
      res.writeHead(204).end();
    } else if (url.pathname.startsWith("/interaction/")) {
      await interaction(req, res);
    } else {
      provider.callback()(req, res);
    }
  } catch (error) {
    res.writeHead(500, { "content-type": "text/plain" }).end(String(error));
  }
});

server.listen(0, "127.0.0.1", () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  provider = build();
  process.stdout.write(`listening ${issuer}\n`);
});
