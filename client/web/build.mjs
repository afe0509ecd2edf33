// `npm run build`: bundles the console into dist/ (index.html, console.js,
// console.css), the files `askgate serve` embeds. The output depends only on the
// sources and the locked packages, so CI can rebuild it and compare with what is
// committed.
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { build } from "esbuild";

rmSync("dist", { recursive: true, force: true });
mkdirSync("dist");
await build({
  entryPoints: ["src/main.ts"],
  outfile: "dist/console.js",
  bundle: true,
  // The SDK's TypeScript sources (its package's "source" export condition), so that
  // the console builds without building the SDK first.
  conditions: ["source"],
  // The SDK reads the caller's trace context through @opentelemetry/api when an
  // application has it; the console asks nothing, so it is not bundled.
  external: ["@opentelemetry/api"],
  format: "esm",
  target: "es2022",
  minify: true,
  legalComments: "eof",
  logLevel: "warning",
});
copyFileSync("index.html", "dist/index.html");
copyFileSync("console.css", "dist/console.css");
