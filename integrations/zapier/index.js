'use strict';
// Postbag for Zapier (docs/integrations.md#zapier): a Zapier Platform CLI app. The base URL
// is a field of the connection, so one app serves any self-hosted Postbag.
const { version: platformVersion } = require('zapier-platform-core');
const { version } = require('./package.json');

/** The connection's base URL without a trailing slash. */
const base = (bundle) => String(bundle.authData.base_url || '').replace(/\/+$/, '');

/** Every request carries the connection's API key. */
const addApiKey = (request, z, bundle) => {
  request.headers = request.headers || {};
  request.headers.Authorization = `Bearer ${bundle.authData.api_key}`;
  return request;
};

/** A body as Zapier keeps it: Zapier de-duplicates on `id`, the body's `receipt` (a
 * submission's body has no `id`; a stream event's `id`, the client's, becomes `client_id`). */
const withId = (body) => {
  const { id: clientId, ...rest } = body;
  return clientId === undefined
    ? { id: body.receipt, ...rest }
    : { id: body.receipt, ...rest, client_id: clientId };
};

const subscribe = (event, source) => async (z, bundle) => {
  const body = { target_url: bundle.targetUrl, event };
  if (source) body[source] = bundle.inputData[source];
  const response = await z.request({ url: `${base(bundle)}/v1/hooks`, method: 'POST', body });
  return response.data; // {id, secret, ...}: Zapier keeps it as bundle.subscribeData
};

const unsubscribe = async (z, bundle) => {
  const response = await z.request({
    url: `${base(bundle)}/v1/hooks/${encodeURIComponent(bundle.subscribeData.id)}`,
    method: 'DELETE',
    skipThrowForStatus: true,
  });
  // Gone already (unsubscribed elsewhere, or after a 410): nothing left to remove.
  if (response.status !== 204 && response.status !== 404) response.throwForStatus();
  return {};
};

const sample = (kind, source) => async (z, bundle) => {
  const id = encodeURIComponent(bundle.inputData[source]);
  const response = await z.request({ url: `${base(bundle)}/v1/${kind}/${id}/sample` });
  return response.data.data.map(withId);
};

const received = (z, bundle) => [withId(bundle.cleanedRequest)];

const listOf = (path) => async (z, bundle) => {
  const response = await z.request({ url: `${base(bundle)}${path}`, params: { limit: 100 } });
  return response.data.data;
};

const formField = {
  key: 'form',
  label: 'Form',
  required: true,
  dynamic: 'form_list.id.name',
  helpText: 'The Postbag form whose new submissions start the Zap.',
};
const streamField = {
  key: 'stream',
  label: 'Stream',
  required: true,
  dynamic: 'stream_list.id.name',
  helpText: 'The Postbag stream whose new events start the Zap.',
};

const submissionSample = {
  id: 'sub_sample',
  event: 'form.submitted',
  receipt: 'sub_sample',
  form: 'frm_sample',
  submitted_at: '2026-10-13T09:30:00.000Z',
  test: true,
  values: { email: 'visitor@example.com', message: 'A sample from Postbag.' },
  labels: {},
  consent: null,
  attachments: {},
  meta: {},
};

module.exports = {
  version,
  platformVersion,
  authentication: {
    type: 'custom',
    fields: [
      {
        key: 'base_url',
        label: 'Postbag URL',
        required: true,
        type: 'string',
        default: 'http://127.0.0.1:8080',
        helpText: "Your Postbag's address, e.g. `https://forms.example.com` (no `/v1`).",
      },
      {
        key: 'api_key',
        label: 'API key',
        required: true,
        type: 'password',
        helpText: 'A key with the admin role (`pb_…`): `postbag create-key ORG`, or POST /v1/keys.',
      },
    ],
    test: async (z, bundle) => {
      const response = await z.request({ url: `${base(bundle)}/v1/hooks`, params: { limit: 1 } });
      return response.data;
    },
    connectionLabel: (z, bundle) => base(bundle),
  },
  beforeRequest: [addApiKey],
  triggers: {
    form_list: {
      key: 'form_list',
      noun: 'Form',
      display: { label: 'List of Forms', description: 'The forms, for the dropdown.', hidden: true },
      operation: { perform: listOf('/v1/forms') },
    },
    stream_list: {
      key: 'stream_list',
      noun: 'Stream',
      display: { label: 'List of Streams', description: 'The streams, for the dropdown.', hidden: true },
      operation: { perform: listOf('/v1/streams') },
    },
    new_submission: {
      key: 'new_submission',
      noun: 'Submission',
      display: {
        label: 'New Submission',
        description: 'Triggers when a form receives an accepted submission.',
      },
      operation: {
        type: 'hook',
        inputFields: [formField],
        performSubscribe: subscribe('submission.created', 'form'),
        performUnsubscribe: unsubscribe,
        perform: received,
        performList: sample('forms', 'form'),
        sample: submissionSample,
      },
    },
    new_stream_event: {
      key: 'new_stream_event',
      noun: 'Event',
      display: {
        label: 'New Stream Event',
        description: 'Triggers when a stream receives an accepted event.',
      },
      operation: {
        type: 'hook',
        inputFields: [streamField],
        performSubscribe: subscribe('stream.event', 'stream'),
        performUnsubscribe: unsubscribe,
        perform: received,
        performList: sample('streams', 'stream'),
        sample: {
          id: 'evt_sample',
          event: 'stream.event',
          stream: 'str_sample',
          receipt: 'evt_sample',
          type: 'example',
          occurred_at: null,
          received_at: '2026-10-13T09:30:00.000Z',
          data: { example: true },
          client_id: 'sample',
        },
      },
    },
  },
  searches: {
    find_submission: {
      key: 'find_submission',
      noun: 'Submission',
      display: {
        label: 'Find Submission',
        description: 'Finds a submission by its receipt, or the newest whose values hold some words.',
      },
      operation: {
        inputFields: [
          { key: 'receipt', label: 'Receipt', helpText: 'A receipt (`sub_…`).' },
          { ...formField, required: false, helpText: 'Search this form only.' },
          { key: 'query', label: 'Words', helpText: 'Words the values hold ("a phrase", -word).' },
        ],
        perform: async (z, bundle) => {
          let receipt = bundle.inputData.receipt;
          if (!receipt) {
            if (!bundle.inputData.query) return [];
            const params = { q: bundle.inputData.query, limit: 1 };
            if (bundle.inputData.form) params.form = bundle.inputData.form;
            const found = await z.request({ url: `${base(bundle)}/v1/submissions`, params });
            if (found.data.data.length === 0) return [];
            receipt = found.data.data[0].id;
          }
          const response = await z.request({
            url: `${base(bundle)}/v1/submissions/${encodeURIComponent(receipt)}`,
            skipThrowForStatus: true,
          });
          if (response.status === 404) return [];
          response.throwForStatus();
          return [response.data];
        },
        sample: { id: 'sub_sample', form: 'frm_sample', status: 'accepted', values: {} },
      },
    },
  },
};
