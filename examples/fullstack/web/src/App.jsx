import { useEffect, useState } from "react";

export default function App() {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);

  useEffect(() => {
    // Same origin: Vite's dev server proxies /api to this world's api service.
    fetch("/api/notes/")
      .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`HTTP ${r.status}`))))
      .then(setData, (e) => setError(e.message));
  }, []);

  if (error) return <p role="alert">Could not load notes: {error}</p>;
  if (!data) return <p>Loading…</p>;
  return (
    <main style={{ fontFamily: "system-ui, sans-serif", maxWidth: 640, margin: "2rem auto" }}>
      <h1>Notes</h1>
      <p>
        database <code>{data.database}</code>, API hits in this world: <strong>{data.hits}</strong>
      </p>
      <ul>
        {data.notes.map((n) => (
          <li key={n.id}>
            {n.pinned ? "📌 " : ""}
            <strong>{n.title}</strong> — {n.body}
          </li>
        ))}
      </ul>
    </main>
  );
}
