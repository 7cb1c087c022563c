//! Reading step: a compose text to the services it declares and its other top-level keys.

use serde_yaml_ng::{Mapping, Value};

use crate::init::repo::ComposeSource;
use crate::init::InitError;

/// What a compose file says: its services (in the file's order) and its top level.
#[derive(Clone, Debug, PartialEq)]
pub(in crate::init) struct ComposeFile {
    /// The file's name as people see it (`docker-compose.yml`, `a.yml + b.yml`).
    pub(in crate::init) name: String,
    /// `services:` (at least one), merge keys (`<<: *defaults`) applied.
    pub(in crate::init) services: Mapping,
    /// The whole top level, for what has no binky equivalent (`volumes:`, `networks:`, …).
    pub(in crate::init) root: Mapping,
}

/// Read `source` as a compose file. A text that is not YAML, or not a compose file with
/// at least one service, is an error naming the file and the fix: `binky init` writes
/// nothing from a compose file it cannot read.
pub(in crate::init) fn read(source: &ComposeSource) -> Result<ComposeFile, InitError> {
    let file = source.name.as_str();
    let yaml_error = |e: serde_yaml_ng::Error| InitError::Yaml {
        file: file.to_owned(),
        detail: e.to_string(),
    };
    let not_compose = |why: &str| InitError::NotCompose {
        file: file.to_owned(),
        why: why.to_owned(),
    };
    let mut doc: Value = serde_yaml_ng::from_str(&source.text).map_err(yaml_error)?;
    // `<<: *defaults` merge keys are common in compose files (`x-common: &common`).
    doc.apply_merge().map_err(yaml_error)?;
    let root = match doc {
        Value::Mapping(m) => m,
        Value::Null => return Err(not_compose("it is empty")),
        _ => return Err(not_compose("its top level is not a mapping")),
    };
    let services = match root.get("services") {
        Some(Value::Mapping(m)) if !m.is_empty() => m.clone(),
        Some(Value::Mapping(_)) | Some(Value::Null) => {
            return Err(not_compose("its `services:` has no service"))
        }
        Some(_) => return Err(not_compose("its `services:` is not a mapping")),
        None => return Err(not_compose("it has no `services:`")),
    };
    Ok(ComposeFile {
        name: source.name.clone(),
        services,
        root,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(text: &str) -> ComposeSource {
        ComposeSource {
            name: "docker-compose.yml".into(),
            text: text.into(),
        }
    }

    #[test]
    fn services_come_in_the_files_order_with_merge_keys_applied() {
        let text = "x-base: &base\n  image: python:3.12\n  restart: always\nservices:\n  web:\n    <<: *base\n    command: gunicorn app\n  db:\n    image: postgres:16\nvolumes:\n  data: {}\n";
        let c = read(&source(text)).unwrap();
        let names: Vec<&str> = c.services.keys().filter_map(Value::as_str).collect();
        assert_eq!(names, ["web", "db"]);
        let web = c.services.get("web").and_then(Value::as_mapping).unwrap();
        assert_eq!(
            web.get("image").and_then(Value::as_str),
            Some("python:3.12")
        );
        assert_eq!(web.get("restart").and_then(Value::as_str), Some("always"));
        assert!(c.root.contains_key("volumes"));
        assert_eq!(c.name, "docker-compose.yml");
    }

    #[test]
    fn a_file_that_does_not_parse_is_named_with_the_fix() {
        let e = read(&source("services:\n  web: [unclosed\n")).unwrap_err();
        assert!(matches!(e, InitError::Yaml { .. }), "{e:?}");
        let said = e.to_string();
        assert!(
            said.starts_with("docker-compose.yml is not valid YAML"),
            "{said}"
        );
        assert!(said.contains("line"), "the parser's place: {said}");
        assert!(said.contains("fix: correct the file"), "{said}");
    }

    #[test]
    fn yaml_that_is_not_a_compose_file_says_what_is_missing() {
        for (text, why) in [
            ("", "it is empty"),
            ("- a\n- b\n", "its top level is not a mapping"),
            ("version: '3'\n", "it has no `services:`"),
            ("services: {}\n", "its `services:` has no service"),
            ("services:\n", "its `services:` has no service"),
            ("services: [web]\n", "its `services:` is not a mapping"),
        ] {
            let said = read(&source(text)).unwrap_err().to_string();
            assert!(
                said.starts_with(&format!(
                    "docker-compose.yml is not a compose file binky can read: {why}"
                )),
                "{text:?}: {said}"
            );
            assert!(
                said.contains("fix: binky init needs a `services:` mapping"),
                "{said}"
            );
        }
    }

    #[test]
    fn a_merge_key_naming_no_mapping_is_a_yaml_error() {
        let said = read(&source("services:\n  web:\n    <<: 3\n")).unwrap_err();
        assert!(matches!(said, InitError::Yaml { .. }), "{said:?}");
    }
}
