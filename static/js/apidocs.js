// /docs: Swagger UI from the server's own static folder (vendor/swagger-ui-bundle.js), reading the OpenAPI
// document of the same server; a file, not an inline script, so the pages' CSP (script-src 'self') holds.
"use strict";
(function () {
  const root = document.getElementById("swagger-ui");
  window.SwaggerUIBundle({
    url: root.dataset.openapi,
    domNode: root,
    deepLinking: true,
    presets: [window.SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
})();
