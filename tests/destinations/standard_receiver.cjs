// A receiver verifying with the real `standardwebhooks` npm package, called exactly as
// docs/webhooks.md tells: a generated whsec_ secret as it is, a typed one as its UTF-8 bytes
// with the raw format.
// Usage: NODE_PATH=… node standard_receiver.cjs SECRET BODY_FILE HEADERS_JSON → true or false.
const { readFileSync } = require("node:fs");
const { Webhook } = require("standardwebhooks");

function receiverFor(secret) {
  return secret.startsWith("whsec_")
    ? new Webhook(secret)
    : new Webhook(new TextEncoder().encode(secret), { format: "raw" });
}

const [secret, bodyFile, headersJson] = process.argv.slice(2);
try {
  receiverFor(secret).verify(readFileSync(bodyFile, "utf8"), JSON.parse(headersJson));
  process.stdout.write("true");
} catch (error) {
  process.stdout.write("false");
}
