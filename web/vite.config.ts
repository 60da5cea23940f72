import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The dashboard bundle (docs/decisions/0022-dashboard.md): Preact through esbuild's automatic JSX runtime (no Vite plugin needed), built
 * into dist/dashboard, which the server serves under /dashboard/. Run by `npm run build:dashboard`.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/dashboard/',
  logLevel: 'warn',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: fileURLToPath(new URL('../dist/dashboard', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
  },
});
