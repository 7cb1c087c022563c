import http from "node:http";
import dns from "node:dns";
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// binky sets API_URL to the api service's proxy URL, e.g.
// http://api.w1.fullstack.localhost:45290 (the port only when the proxy is not on 80).
const apiUrl = process.env.API_URL ?? "http://127.0.0.1:8000";

// Browsers resolve every `*.localhost` name to the loopback address (RFC 6761); glibc's
// resolver, which Node uses, often does not. Do what the browser does, for this proxy only.
const localhostAgent = new http.Agent({
  keepAlive: true,
  lookup(hostname, options, callback) {
    if (hostname === "localhost" || hostname.endsWith(".localhost")) {
      return options.all
        ? callback(null, [{ address: "127.0.0.1", family: 4 }])
        : callback(null, "127.0.0.1", 4);
    }
    return dns.lookup(hostname, options, callback);
  },
});

export default defineConfig({
  plugins: [react()],
  server: {
    // `web.<world>.fullstack.localhost` reaches Vite through binky's proxy.
    allowedHosts: [".localhost"],
    proxy: {
      "/api": {
        target: apiUrl,
        changeOrigin: true, // Host: api.<world>.fullstack.localhost, so binky routes it
        agent: localhostAgent,
      },
    },
  },
});
