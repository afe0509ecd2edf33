// A real OpenID provider for the sign-in tests: panva's `oidc-provider` (the certified
// implementation), in this process, on 127.0.0.1. Its development login form takes any
// login name; the accounts below give the people their names and groups. `restart`
// brings it back on the same port with a new signing key: a key rotation, as an
// identity provider does it.

import { generateKeyPairSync, randomUUID } from "node:crypto";
import net from "node:net";
import Provider from "oidc-provider";

/** The people of the provider, by login name. */
export const PEOPLE = {
  ana: { name: "Ana Lima", groups: ["ops"] },
  bo: { name: "Bo Berg", groups: ["sre"] },
  cy: { name: "Cy Diaz", groups: ["finance"] },
};

/** The console's client at the provider. */
export const CLIENT_ID = "askgate-console";
export const CLIENT_SECRET = "console-client-secret-for-the-tests-only";

/** A port nobody listens on now (for a server that must be named before it starts). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** An RSA signing key as a private JWK with a fresh kid. */
function signingKey() {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return { ...privateKey.export({ format: "jwk" }), kid: randomUUID(), alg: "RS256", use: "sig" };
}

export class IdentityProvider {
  /** Starts the provider; `redirectUri` is the console's callback it sends people back to. */
  static async start(redirectUri) {
    const idp = new IdentityProvider(redirectUri, await freePort());
    await idp.listen();
    return idp;
  }

  constructor(redirectUri, port) {
    this.redirectUri = redirectUri;
    this.port = port;
    this.issuer = `http://127.0.0.1:${port}`;
    this.kids = [];
  }

  async listen() {
    const key = signingKey();
    this.kids.push(key.kid);
    const provider = new Provider(this.issuer, {
      clients: [
        {
          client_id: CLIENT_ID,
          client_secret: CLIENT_SECRET,
          redirect_uris: [this.redirectUri],
          grant_types: ["authorization_code"],
          response_types: ["code"],
          token_endpoint_auth_method: "client_secret_basic",
        },
      ],
      jwks: { keys: [key] },
      cookies: { keys: ["idp-cookie-key-for-the-tests-only"] },
      claims: { openid: ["sub"], profile: ["name"], email: ["email"], groups: ["groups"] },
      // The claims the scopes ask for go in the ID token itself, which askgate reads.
      conformIdTokenClaims: false,
      pkce: { required: () => true },
      findAccount: async (_ctx, id) => {
        const person = PEOPLE[id];
        if (person === undefined) return undefined;
        return {
          accountId: id,
          claims: async () => ({ sub: id, name: person.name, email: `${id}@example.com`, groups: person.groups }),
        };
      },
      features: { devInteractions: { enabled: true } },
    });
    provider.on("server_error", (_ctx, error) => console.error(`identity provider: ${error.stack}`));
    this.server = provider.listen(this.port, "127.0.0.1");
    await new Promise((resolve, reject) => {
      this.server.once("listening", resolve);
      this.server.once("error", reject);
    });
  }

  /** Closes the provider (its sessions go with it) and starts it again with a new key. */
  async restart() {
    await this.close();
    await this.listen();
  }

  close() {
    this.server.closeAllConnections?.();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * Signs `login` in at the provider's pages `page` was sent to (its development login
 * form, then its consent page when it shows one); resolves once the browser left the
 * provider.
 */
export async function signInAtProvider(page, idp, login) {
  await page.waitForURL((url) => url.origin === idp.issuer);
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill("any password");
  await page.getByRole("button", { name: "Sign-in" }).click();
  const consent = page.getByRole("button", { name: "Continue" });
  const left = (url) => url.origin !== idp.issuer;
  // The loser of the race is left waiting: its failure is not this test's.
  await Promise.race([
    consent.waitFor().catch(() => {}),
    page.waitForURL(left).catch(() => {}),
  ]);
  if (!left(new URL(page.url()))) await consent.click();
  await page.waitForURL(left);
}
