'use strict';
// The Postbag Trigger node (docs/integrations.md#n8n): n8n's webhook lifecycle on
// Postbag's REST hooks. Activating a workflow subscribes its webhook URL (POST /v1/hooks),
// deactivating unsubscribes it (DELETE /v1/hooks/{id}); each delivery is checked against the
// hook's secret (Standard Webhooks) and started once per `webhook-id` (a delivery retried
// after a lost answer carries the same id). Plain JavaScript typed by JSDoc against
// n8n-workflow (no build step).
const crypto = require('node:crypto');

/** How many delivery ids a workflow remembers, to start each delivery once. */
const SEEN = 500;
/** How old (or how far ahead) a delivery's `webhook-timestamp` may be, in seconds. */
const TOLERANCE = 300;

/**
 * The credential's host without a trailing slash, and the request's headers.
 * @param {import('n8n-workflow').IHookFunctions | import('n8n-workflow').ILoadOptionsFunctions} self
 */
async function connection(self) {
  const credentials = await self.getCredentials('postbagApi');
  return {
    host: String(credentials.host).replace(/\/+$/, ''),
    headers: { Authorization: `Bearer ${credentials.apiKey}`, Accept: 'application/json' },
  };
}

/**
 * One call to Postbag, answering `{statusCode, body}` whatever the status.
 * @param {import('n8n-workflow').IHookFunctions | import('n8n-workflow').ILoadOptionsFunctions} self
 * @param {import('n8n-workflow').IHttpRequestMethods} method
 * @param {string} path
 * @param {object} [options]
 */
async function call(self, method, path, options = {}) {
  const { host, headers } = await connection(self);
  /** @type {import('n8n-workflow').IHttpRequestOptions} */
  const request = {
    method,
    url: `${host}${path}`,
    headers,
    json: true,
    returnFullResponse: true,
    ignoreHttpStatusErrors: true,
    ...options,
  };
  const response = await self.helpers.httpRequest(request);
  if (response.statusCode >= 400 && response.statusCode !== 404) {
    const detail = response.body && response.body.detail ? `: ${response.body.detail}` : '';
    throw new Error(`Postbag answered ${response.statusCode}${detail}`);
  }
  return response;
}

/**
 * Whether a Standard Webhooks signature header holds the signature of this delivery.
 * @param {string} secret the hook's `whsec_…` secret
 * @param {Record<string, string | string[] | undefined>} headers
 * @param {Buffer} body the raw body
 * @param {number} now unix seconds
 */
function verified(secret, headers, body, now) {
  const id = String(headers['webhook-id'] || '');
  const timestamp = String(headers['webhook-timestamp'] || '');
  const signatures = String(headers['webhook-signature'] || '').split(' ');
  if (!id || !/^\d+$/.test(timestamp) || Math.abs(now - Number(timestamp)) > TOLERANCE) {
    return false;
  }
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`), body]);
  const expected = Buffer.from(crypto.createHmac('sha256', key).update(signed).digest('base64'));
  return signatures.some((entry) => {
    const [version, signature] = entry.split(',', 2);
    const given = Buffer.from(signature || '');
    return version === 'v1' && given.length === expected.length && crypto.timingSafeEqual(given, expected);
  });
}

/** @implements {import('n8n-workflow').INodeType} */
class PostbagTrigger {
  constructor() {
    /** @type {import('n8n-workflow').INodeTypeDescription} */
    this.description = {
      displayName: 'Postbag Trigger',
      name: 'postbagTrigger',
      icon: 'fa:inbox',
      group: ['trigger'],
      version: 1,
      subtitle: '={{$parameter["event"]}}',
      description: 'Starts the workflow on new Postbag submissions, stream events, dead deliveries or paused destinations',
      defaults: { name: 'Postbag Trigger' },
      inputs: [],
      outputs: ['main'],
      credentials: [{ name: 'postbagApi', required: true }],
      webhooks: [{ name: 'default', httpMethod: 'POST', responseMode: 'onReceived', path: 'webhook' }],
      properties: [
        {
          displayName: 'Event',
          name: 'event',
          type: 'options',
          default: 'submission.created',
          options: [
            { name: 'New Submission', value: 'submission.created', description: "A form's accepted submission" },
            { name: 'New Stream Event', value: 'stream.event', description: "A stream's accepted event" },
            { name: 'Delivery Dead', value: 'delivery.dead', description: 'A delivery gave up' },
            { name: 'Destination Paused', value: 'destination.paused', description: 'A destination paused itself' },
          ],
        },
        {
          displayName: 'Form Name or ID',
          name: 'form',
          type: 'options',
          typeOptions: { loadOptionsMethod: 'getForms' },
          default: '',
          required: true,
          displayOptions: { show: { event: ['submission.created'] } },
          description: 'Choose from the list, or specify an ID using an expression',
        },
        {
          displayName: 'Stream Name or ID',
          name: 'stream',
          type: 'options',
          typeOptions: { loadOptionsMethod: 'getStreams' },
          default: '',
          required: true,
          displayOptions: { show: { event: ['stream.event'] } },
          description: 'Choose from the list, or specify an ID using an expression',
        },
      ],
    };

    this.methods = {
      loadOptions: {
        /** @this {import('n8n-workflow').ILoadOptionsFunctions} */
        async getForms() {
          const response = await call(this, 'GET', '/v1/forms', { qs: { limit: 100 } });
          return response.body.data.map((form) => ({ name: form.name, value: form.id }));
        },
        /** @this {import('n8n-workflow').ILoadOptionsFunctions} */
        async getStreams() {
          const response = await call(this, 'GET', '/v1/streams', { qs: { limit: 100 } });
          return response.body.data.map((stream) => ({ name: stream.name, value: stream.id }));
        },
      },
    };

    this.webhookMethods = {
      default: {
        /**
         * Whether Postbag still holds this workflow's hook: the one it made (by id), or
         * one to the same URL for the same event (made before its id was kept).
         * @this {import('n8n-workflow').IHookFunctions}
         */
        async checkExists() {
          const data = this.getWorkflowStaticData('node');
          const url = this.getNodeWebhookUrl('default');
          if (data.hookId) {
            const response = await call(this, 'GET', `/v1/hooks/${data.hookId}`);
            if (response.statusCode === 200 && response.body.target_url === url) return true;
            delete data.hookId;
            delete data.secret;
            return false;
          }
          const response = await call(this, 'GET', '/v1/hooks', {
            qs: { event: this.getNodeParameter('event'), limit: 100 },
          });
          // Its secret was shown once, to whoever made it: that hook cannot be verified here.
          const found = response.body.data.find((hook) => hook.target_url === url);
          if (found) await call(this, 'DELETE', `/v1/hooks/${found.id}`);
          return false;
        },
        /**
         * Subscribe the workflow's webhook URL; keep the hook's id and secret.
         * @this {import('n8n-workflow').IHookFunctions}
         */
        async create() {
          const event = /** @type {string} */ (this.getNodeParameter('event'));
          /** @type {Record<string, string>} */
          const body = { target_url: /** @type {string} */ (this.getNodeWebhookUrl('default')), event };
          if (event === 'submission.created') body.form = /** @type {string} */ (this.getNodeParameter('form'));
          if (event === 'stream.event') body.stream = /** @type {string} */ (this.getNodeParameter('stream'));
          const response = await call(this, 'POST', '/v1/hooks', { body });
          if (response.statusCode !== 201) throw new Error(`Postbag answered ${response.statusCode}`);
          const data = this.getWorkflowStaticData('node');
          data.hookId = response.body.id;
          data.secret = response.body.secret;
          data.seen = [];
          return true;
        },
        /**
         * Unsubscribe (a hook already gone, by a 410 or from elsewhere, is fine).
         * @this {import('n8n-workflow').IHookFunctions}
         */
        async delete() {
          const data = this.getWorkflowStaticData('node');
          if (data.hookId) await call(this, 'DELETE', `/v1/hooks/${data.hookId}`);
          delete data.hookId;
          delete data.secret;
          delete data.seen;
          return true;
        },
      },
    };
  }

  /**
   * A delivery: refused unless signed with the hook's secret; started once per `webhook-id`.
   * @this {import('n8n-workflow').IWebhookFunctions}
   * @returns {Promise<import('n8n-workflow').IWebhookResponseData>}
   */
  async webhook() {
    const request = this.getRequestObject();
    const data = this.getWorkflowStaticData('node');
    const raw = request.rawBody || Buffer.from(JSON.stringify(request.body));
    if (!data.secret || !verified(String(data.secret), request.headers, raw, Math.floor(Date.now() / 1000))) {
      this.getResponseObject().status(401).send('signature not verified');
      return { noWebhookResponse: true };
    }
    const id = String(request.headers['webhook-id']);
    const seen = Array.isArray(data.seen) ? data.seen : [];
    if (seen.includes(id)) {
      // The same delivery again (its answer was lost): acknowledged, not started twice.
      return { webhookResponse: 'duplicate' };
    }
    data.seen = [...seen, id].slice(-SEEN);
    return { workflowData: [this.helpers.returnJsonArray([request.body])] };
  }
}

module.exports = { PostbagTrigger };
