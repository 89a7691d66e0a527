// ESLint for the admin page (browser ES modules) and its Node unit tests.
// Run by `make lint`; the tools come from package-lock.json via `make js`.
import js from "@eslint/js";
import globals from "globals";

export default [
  // Other trees hold third-party JavaScript (the venv's packages) or generated output.
  { ignores: [".venv/", "build/", "dist/", "test-artifacts/", ".delayline/"] },
  js.configs.recommended,
  {
    files: ["src/delayline/admin/static/**/*.js"],
    languageOptions: { sourceType: "module", globals: globals.browser },
  },
  {
    files: ["tests/js/**/*.mjs", "eslint.config.js"],
    languageOptions: { sourceType: "module", globals: globals.node },
  },
];
