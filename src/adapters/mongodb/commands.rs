//! The commands binky sends to the server, built as documents (pure: tested without a server).

use super::*;

/// The database (and user) name of a slice: binky 0.1.2's mapping, forbidden characters
/// to `_`, shortened to [`MAX_DB_NAME`] bytes with a hash suffix.
pub fn database_name(slice: &str) -> Result<String> {
    let mapped: String = slice
        .chars()
        .map(|c| {
            if FORBIDDEN.contains(&c) || c == '\0' {
                '_'
            } else {
                c
            }
        })
        .collect();
    if mapped.is_empty() || !mapped.is_ascii() {
        return Err(AdapterError::Config(format!(
            "slice name `{slice}` cannot name a MongoDB database: 1 to {MAX_DB_NAME} ASCII \
             characters"
        )));
    }
    Ok(fit_name(&mapped, MAX_DB_NAME))
}

/// Is `name` a database name MongoDB takes?
pub fn valid_database_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_DB_NAME
        && !name.contains(FORBIDDEN)
        && !name.contains('\0')
}

/// `createUser`: the slice's user, in its database, with its secret and roles.
pub fn create_user_command(user: &str, db: &str, secret: &str) -> Document {
    doc! { "createUser": user, "pwd": secret, "roles": slice_roles(db) }
}

/// `updateUser`: the password and roles set again (an existing user, healed).
pub fn update_user_command(user: &str, db: &str, secret: &str) -> Document {
    doc! { "updateUser": user, "pwd": secret, "roles": slice_roles(db) }
}

/// `dropUser` (teardown uses [`drop_all_users_command`], which also takes users a world
/// made itself; this one is for a single user).
pub fn drop_user_command(user: &str) -> Document {
    doc! { "dropUser": user }
}

/// Every user defined in the database the command runs in.
pub fn drop_all_users_command() -> Document {
    doc! { "dropAllUsersFromDatabase": 1 }
}

/// Every user-defined role of the database the command runs in.
pub fn drop_all_roles_command() -> Document {
    doc! { "dropAllRolesFromDatabase": 1 }
}

/// The template user keeps `read` only.
pub fn seal_command(user: &str, db: &str) -> Document {
    doc! { "updateUser": user, "roles": [ { "role": "read", "db": db } ] }
}

/// The roles of a slice user: read, write and administer its own database.
pub(super) fn slice_roles(db: &str) -> Bson {
    Bson::Array(vec![
        Bson::Document(doc! { "role": "readWrite", "db": db }),
        Bson::Document(doc! { "role": "dbAdmin", "db": db }),
    ])
}

/// The aggregation copying collection `coll` into database `to`, server-side (run in the
/// template's database).
pub fn copy_command(coll: &str, to: &str) -> Document {
    doc! {
        "aggregate": coll,
        "pipeline": [ { "$out": { "db": to, "coll": coll } } ],
        "cursor": {},
        // A faithful copy, even of documents older than the collection's validator.
        "bypassDocumentValidation": true,
    }
}

/// `create` for a copy of the collection or view described by a `listCollections` entry;
/// `None` when there is nothing to say beyond what `$out` does (a plain collection).
pub fn create_command(info: &Document) -> Result<Option<Document>, String> {
    let name = info
        .get_str("name")
        .map_err(|_| "an entry without a name".to_owned())?;
    let kind = info.get_str("type").unwrap_or("collection");
    let options = info.get_document("options").cloned().unwrap_or_default();
    match kind {
        "collection" => {
            if options.get_bool("capped").unwrap_or(false) {
                return Err(format!(
                    "collection `{name}` is capped, which $out cannot copy"
                ));
            }
            if options.is_empty() {
                return Ok(None);
            }
            let mut cmd = doc! { "create": name };
            cmd.extend(options);
            Ok(Some(cmd))
        }
        "view" => {
            let mut cmd = doc! { "create": name };
            cmd.extend(options);
            Ok(Some(cmd))
        }
        other => Err(format!(
            "`{name}` is a {other} collection, which $out cannot copy"
        )),
    }
}

/// The index of a `listIndexes` entry as `createIndexes` takes it; `None` for `_id_`, which
/// every collection has.
pub fn index_spec(index: &Document) -> Option<Document> {
    if index.get_str("name").ok()? == "_id_" {
        return None;
    }
    let mut spec = index.clone();
    for k in INDEX_NOT_CARRIED {
        spec.remove(*k);
    }
    Some(spec)
}

/// `createIndexes` for collection `coll`.
pub fn create_indexes_command(coll: &str, indexes: Vec<Document>) -> Document {
    doc! { "createIndexes": coll, "indexes": indexes }
}

/// The marker document's filter as a home claims it: binky's marker that names no home
/// yet. With the update below as an upsert, one of two homes claiming at once sets its
/// home; the other's upsert meets the marker's `_id` (a duplicate key) and reads it back.
pub fn claim_filter() -> Document {
    doc! { "_id": "binky", "home": { "$exists": false } }
}

/// The marker's update as `home` claims it.
pub fn claim_update(home: &str) -> Document {
    doc! { "$set": { "managed": true, "home": home } }
}

/// Which home a slice's marker document names (`None`: no marker); unmarked for a marker
/// without a home, or a database without a marker (`exists`), absent otherwise.
pub fn maker_of(marker: Option<&Document>, exists: bool) -> Maker {
    match marker.map(|m| m.get_str("home")) {
        Some(Ok(home)) => Maker::Home(home.to_owned()),
        Some(Err(_)) => Maker::Unmarked,
        None if exists => Maker::Unmarked,
        None => Maker::Absent,
    }
}
