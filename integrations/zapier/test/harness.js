'use strict';
// Runs steps of the app, in turn, through zapier-platform-core's app tester against a
// real Postbag, printing their results as a JSON array on a line of its own after
// `RESULT ` (tests/integrations/test_zapier.py drives it).
// Usage: node test/harness.js '[["STEP", {"json": "arguments"}], ...]'
// Environment: POSTBAG_URL, POSTBAG_KEY.
const zapier = require('zapier-platform-core');
// The app definition's check against zapier-platform-schema, as `zapier validate` and
// `zapier push` make it.
const { compileApp, validateApp } = require('zapier-platform-core/src/tools/schema');
const App = require('../index');

const appTester = zapier.createAppTester(App);
const authData = { base_url: `${process.env.POSTBAG_URL}/`, api_key: process.env.POSTBAG_KEY };
const { triggers, searches } = App;

const steps = {
  validate: async () => validateApp(compileApp(App)).map((error) => error.stack),
  auth: () => appTester(App.authentication.test, { authData }),
  forms: () => appTester(triggers.form_list.operation.perform, { authData }),
  streams: () => appTester(triggers.stream_list.operation.perform, { authData }),
  subscribe: ({ trigger, inputData, targetUrl }) =>
    appTester(triggers[trigger].operation.performSubscribe, { authData, inputData, targetUrl }),
  list: ({ trigger, inputData }) =>
    appTester(triggers[trigger].operation.performList, { authData, inputData }),
  receive: ({ trigger, body }) =>
    appTester(triggers[trigger].operation.perform, { authData, cleanedRequest: body }),
  unsubscribe: ({ trigger, subscribeData }) =>
    appTester(triggers[trigger].operation.performUnsubscribe, { authData, subscribeData }),
  find: ({ inputData }) => appTester(searches.find_submission.operation.perform, { authData, inputData }),
};

const run = async (list) => {
  const results = [];
  for (const [step, args] of list) results.push(await steps[step](args));
  return results;
};

run(JSON.parse(process.argv[2])).then(
  (result) => process.stdout.write(`\nRESULT ${JSON.stringify({ ok: true, result })}\n`),
  (error) => process.stdout.write(`\nRESULT ${JSON.stringify({ ok: false, error: String(error.message) })}\n`),
);
