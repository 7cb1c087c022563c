//! `[groups]`: `NAME = ["svc", …]` or `NAME = "*"`.

use std::collections::{BTreeMap, BTreeSet};

use binky_controllers::spec::Service;
use toml::de::DeValue;

use super::{Cx, Table};

impl Cx<'_> {
    /// The `[groups]` table of `root`: each group's members (`"*"` is every valid service).
    pub(super) fn groups(
        &mut self,
        root: &Table<'_>,
        services: &BTreeMap<String, Service>,
        declared: &BTreeSet<String>,
    ) -> BTreeMap<String, Vec<String>> {
        let mut groups = BTreeMap::new();
        if let Some(v) = Self::get(root, "groups") {
            if let Some(t) = self.expect_table(v, "groups") {
                for (k, gv) in t.iter() {
                    let path = format!("groups.{}", k.get_ref());
                    match gv.get_ref() {
                        DeValue::String(s) if s == "*" => {
                            groups.insert(
                                k.get_ref().to_string(),
                                services.keys().cloned().collect(),
                            );
                        }
                        DeValue::Array(items) => {
                            let mut members = Vec::new();
                            for (i, item) in items.iter().enumerate() {
                                if let Some(m) = self.string_value(item, &format!("{path}[{i}]")) {
                                    if !declared.contains(&m) {
                                        let known: Vec<&str> =
                                            services.keys().map(String::as_str).collect();
                                        self.error(
                                            item.span(),
                                            &path,
                                            format!("unknown service `{m}`"),
                                            Some(format!("services: {}", known.join(", "))),
                                        );
                                    }
                                    members.push(m);
                                }
                            }
                            groups.insert(k.get_ref().to_string(), members);
                        }
                        _ => {
                            self.wrong_type::<()>(
                                gv,
                                &path,
                                "a list of services or \"*\"",
                                format!(
                                    "{} = [\"web\", \"api\"] or {} = \"*\"",
                                    k.get_ref(),
                                    k.get_ref()
                                ),
                            );
                        }
                    }
                }
            }
        }
        groups
    }
}
