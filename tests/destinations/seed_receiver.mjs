// A receiver written from the seed's contract: its verifyFormWebhook routine, verbatim.
// Usage: node seed_receiver.mjs SECRET BODY_FILE SIGNATURE_HEADER → prints true or false.
import { readFileSync } from "node:fs";

async function verifyFormWebhook(secret, rawBody, signatureHeader) {
  const hex = signatureHeader?.startsWith("sha256=")
    ? signatureHeader.slice(7)
    : "";
  if (!/^[0-9a-f]{64}$/.test(hex)) return false;
  const key = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["verify"],
  );
  const signature = new Uint8Array(
    hex.match(/../g).map((pair) => parseInt(pair, 16)),
  );
  return crypto.subtle.verify(
    "HMAC",
    key,
    signature,
    new TextEncoder().encode(rawBody),
  );
}

const [secret, bodyFile, header] = process.argv.slice(2);
const ok = await verifyFormWebhook(secret, readFileSync(bodyFile, "utf8"), header);
process.stdout.write(String(ok));
