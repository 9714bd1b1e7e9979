'use strict';
// n8n loads the files named under "n8n" in package.json; this entry point lists them too.
module.exports = {
  credentials: { PostbagApi: require('./credentials/PostbagApi.credentials').PostbagApi },
  nodes: { PostbagTrigger: require('./nodes/PostbagTrigger/PostbagTrigger.node').PostbagTrigger },
};
