//! `[agents]`: `harness`, `expose = [services]`, `verify = [commands]`.

use std::collections::BTreeSet;

use binky_controllers::spec::Agents;

use super::{Cx, Table};

const AGENTS_KEYS: &[&str] = &["harness", "expose", "verify"];

impl Cx<'_> {
    /// The `[agents]` table of `root`.
    pub(super) fn agents(&mut self, root: &Table<'_>, declared: &BTreeSet<String>) -> Agents {
        let mut agents = Agents::default();
        if let Some(v) = Self::get(root, "agents") {
            if let Some(t) = self.expect_table(v, "agents") {
                self.unknown_keys(t, "agents", AGENTS_KEYS);
                agents.harness = self.string(t, "agents", "harness");
                for (name, span) in self
                    .string_list(t, "agents", "expose", false)
                    .unwrap_or_default()
                {
                    if !declared.contains(&name) {
                        // The file runs: a name that matches nothing is kept (it exposes
                        // nothing) and said, not refused.
                        let known: Vec<&str> = declared.iter().map(String::as_str).collect();
                        self.warn_at(
                            span,
                            "agents.expose",
                            format!(
                                "unknown service `{name}` exposes nothing; services: {}",
                                known.join(", ")
                            ),
                        );
                    }
                    agents.expose.push(name);
                }
                agents.verify = self
                    .strings(t, "agents", "verify", false)
                    .unwrap_or_default();
            }
        }
        agents
    }
}
