//! Reading step: the frameworks of the project that refuse a request whose `Host` they do
//! not know (binky's proxy sends `<service>.<world>.<project>.localhost`).

use std::collections::BTreeMap;

/// A framework that checks the `Host` header, and the file that says it is there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::init) enum HostCheck {
    /// Django, by its `manage.py`.
    Django(String),
    /// Rails, by its `config/application.rb`.
    Rails(String),
    /// Vite, by its `vite.config.*`.
    Vite(String),
}

/// The host checks `files` (paths relative to the project → text) show, in path order.
pub(in crate::init) fn read(files: &BTreeMap<String, String>) -> Vec<HostCheck> {
    files
        .keys()
        .filter_map(|rel| {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            if name == "manage.py" {
                Some(HostCheck::Django(rel.clone()))
            } else if rel == "config/application.rb" || rel.ends_with("/config/application.rb") {
                Some(HostCheck::Rails(rel.clone()))
            } else if name.starts_with("vite.config.") {
                Some(HostCheck::Vite(rel.clone()))
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn django_rails_and_vite_are_known_by_their_files() {
        let files: BTreeMap<String, String> = [
            "manage.py",
            "web/vite.config.ts",
            "config/application.rb",
            "api/config/application.rb",
            "app/config.py",
        ]
        .iter()
        .map(|p| (p.to_string(), String::new()))
        .collect();
        assert_eq!(
            read(&files),
            [
                HostCheck::Rails("api/config/application.rb".into()),
                HostCheck::Rails("config/application.rb".into()),
                HostCheck::Django("manage.py".into()),
                HostCheck::Vite("web/vite.config.ts".into()),
            ]
        );
    }
}
