'use strict';
// Runs the Postbag Trigger's lifecycle methods against a real Postbag, as n8n calls them,
// in a context that does what n8n's does for these methods: its static data (kept in a
// file between steps), parameters, credentials, webhook URL, HTTP helper, request and
// response. tests/integrations/test_n8n.py drives it.
// Usage: node test/lifecycle.js STEP '{"json": "arguments"}'
const fs = require('node:fs');
const { PostbagTrigger } = require('../nodes/PostbagTrigger/PostbagTrigger.node');

const node = new PostbagTrigger();

/** n8n's `helpers.httpRequest` for the options the node uses. */
async function httpRequest(options) {
  const url = new URL(options.url);
  for (const [name, value] of Object.entries(options.qs || {})) url.searchParams.set(name, String(value));
  const headers = { ...options.headers };
  let body;
  if (options.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(options.body);
  }
  const response = await fetch(url, { method: options.method, headers, body });
  const text = await response.text();
  const parsed = text ? JSON.parse(text) : null;
  if (!options.ignoreHttpStatusErrors && response.status >= 400) throw new Error(`HTTP ${response.status}`);
  return options.returnFullResponse ? { statusCode: response.status, body: parsed } : parsed;
}

function context(args, extra = {}) {
  const data = fs.existsSync(args.state) ? JSON.parse(fs.readFileSync(args.state, 'utf8')) : {};
  const answered = {};
  const self = {
    getWorkflowStaticData: () => data,
    getNodeParameter: (name) => args.parameters[name],
    getCredentials: async () => ({ host: args.host, apiKey: args.apiKey }),
    getNodeWebhookUrl: () => args.webhookUrl,
    helpers: { httpRequest, returnJsonArray: (items) => items.map((json) => ({ json })) },
    getResponseObject: () => ({
      status(code) {
        answered.status = code;
        return this;
      },
      send(text) {
        answered.text = text;
      },
    }),
    ...extra,
  };
  const save = () => fs.writeFileSync(args.state, JSON.stringify(data));
  return { self, data, answered, save };
}

const hooks = node.webhookMethods.default;
const steps = {
  async activate(args) {
    const { self, data, save } = context(args);
    const before = await hooks.checkExists.call(self);
    const created = before ? false : await hooks.create.call(self);
    const after = await hooks.checkExists.call(self);
    const forms = await node.methods.loadOptions.getForms.call(self);
    save();
    return { before, created, after, hookId: data.hookId, secretKept: Boolean(data.secret), forms };
  },
  async deliver(args) {
    const raw = fs.readFileSync(args.bodyFile);
    const request = { headers: args.headers, body: JSON.parse(raw.toString('utf8')), rawBody: raw };
    const { self, answered, save } = context(args, { getRequestObject: () => request });
    const result = await node.webhook.call(self);
    save();
    return { result, answered };
  },
  async deactivate(args) {
    const { self, data, save } = context(args);
    const hookId = data.hookId;
    const deleted = await hooks.delete.call(self);
    const after = await hooks.checkExists.call(self);
    save();
    return { hookId, deleted, after };
  },
};

const [step, args] = process.argv.slice(2);
steps[step](JSON.parse(args)).then(
  (result) => process.stdout.write(`\nRESULT ${JSON.stringify({ ok: true, result })}\n`),
  (error) => process.stdout.write(`\nRESULT ${JSON.stringify({ ok: false, error: String(error.stack) })}\n`),
);
