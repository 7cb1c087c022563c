import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// binky sets API_URL to the api service's direct address (`${api.url}`), e.g.
// http://localhost:4213: a server-side call needs no `*.localhost` name lookup, which
// glibc's resolver (Node's) often cannot do. The browser reaches this page through the
// proxy (`web.<world>.fullstack.localhost`) and its `/api` calls come back here.
const apiUrl = process.env.API_URL ?? "http://127.0.0.1:8000";

export default defineConfig({
  plugins: [react()],
  server: {
    // `web.<world>.fullstack.localhost` reaches Vite through binky's proxy.
    allowedHosts: [".localhost"],
    proxy: {
      "/api": { target: apiUrl, changeOrigin: true },
    },
  },
});
