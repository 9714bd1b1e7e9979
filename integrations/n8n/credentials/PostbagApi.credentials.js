'use strict';
// The Postbag credential: the installation's address (Host) and an API key with the admin
// role. Plain JavaScript typed by JSDoc against n8n-workflow (no build step).

/** @implements {import('n8n-workflow').ICredentialType} */
class PostbagApi {
  constructor() {
    this.name = 'postbagApi';
    this.displayName = 'Postbag API';
    this.documentationUrl = 'https://github.com/postbag/postbag/blob/main/docs/integrations.md#n8n';
    /** @type {import('n8n-workflow').INodeProperties[]} */
    this.properties = [
      {
        displayName: 'Host',
        name: 'host',
        type: 'string',
        default: 'http://127.0.0.1:8080',
        placeholder: 'https://forms.example.com',
        description: "Your Postbag's address, without /v1",
        required: true,
      },
      {
        displayName: 'API Key',
        name: 'apiKey',
        type: 'string',
        typeOptions: { password: true },
        default: '',
        description: 'A key with the admin role (pb_…)',
        required: true,
      },
    ];
    /** @type {import('n8n-workflow').IAuthenticateGeneric} */
    this.authenticate = {
      type: 'generic',
      properties: { headers: { Authorization: '=Bearer {{$credentials.apiKey}}' } },
    };
    /** @type {import('n8n-workflow').ICredentialTestRequest} */
    this.test = { request: { baseURL: '={{$credentials.host.replace(/\\/+$/, "")}}', url: '/v1/hooks' } };
  }
}

module.exports = { PostbagApi };
