//! `binky settings [KEY=VALUE…]` and `binky config`: the machine's settings (never a
//! repository's): resident limits, approvals, the proxy's ports.

use binky_controllers::gate::SETTINGS;
use binky_controllers::store::{self, DEFAULT_HTTPS_PORT, DEFAULT_PROXY_PORT};

use super::context::{Ctx, Failure};
use super::exit;

/// Every setting: (key, default, what it does).
fn all() -> Vec<(&'static str, String, &'static str)> {
    let mut v: Vec<(&'static str, String, &'static str)> = SETTINGS
        .iter()
        .map(|(k, d, what)| (*k, (*d).to_owned(), *what))
        .collect();
    v.push((
        "secret_command",
        String::new(),
        "how ${secret:REF} in env is resolved at spawn, `{ref}` replaced (e.g. `op read op://vault/{ref}`); unset: BINKY_SECRET_<REF> from the daemon's environment",
    ));
    v.push((
        "proxy_port",
        DEFAULT_PROXY_PORT.to_string(),
        "the proxy's HTTP port (0: off); set it with `binky port --proxy N`",
    ));
    v.push((
        "https_port",
        DEFAULT_HTTPS_PORT.to_string(),
        "the proxy's HTTPS port (0: off); set it with `binky port --https N`",
    ));
    v
}

/// Check a value for a key; the error names the key and what it takes.
fn validate(key: &str, value: &str) -> Result<String, String> {
    let v = value.trim();
    let uint = || {
        v.parse::<u64>()
            .map(|n| n.to_string())
            .map_err(|_| format!("{key} takes a whole number ≥ 0, not `{v}`"))
    };
    match key {
        "max_parallel" | "focus_minutes" => uint(),
        "ram_reserve_percent" => match v.parse::<f64>() {
            Ok(n) if (0.0..=90.0).contains(&n) => Ok(v.to_owned()),
            _ => Err(format!(
                "ram_reserve_percent takes a percent from 0 to 90, not `{v}`"
            )),
        },
        "disk_reserve_gib" => match v.parse::<f64>() {
            Ok(n) if n >= 0.0 && n.is_finite() => Ok(v.to_owned()),
            _ => Err(format!(
                "disk_reserve_gib takes a number of GiB ≥ 0, not `{v}`"
            )),
        },
        "cool_oldest" | "approvals" => match v {
            "true" | "on" | "yes" | "1" => Ok("true".into()),
            "false" | "off" | "no" | "0" => Ok("false".into()),
            _ => Err(format!("{key} takes true or false, not `{v}`")),
        },
        "secret_command" if v.is_empty() || v.contains("{ref}") => Ok(v.to_owned()),
        "secret_command" => Err(format!(
            "secret_command must contain {{ref}} where the reference goes, e.g. `op read op://vault/{{ref}}` (got `{v}`)"
        )),
        "proxy_port" | "https_port" => Err(format!(
            "{key} is set with `binky port` (it also moves the proxy): binky port --{} {v}",
            if key == "proxy_port" {
                "proxy"
            } else {
                "https"
            }
        )),
        _ => Err(format!(
            "no setting `{key}`; settings: {}",
            all().iter().map(|s| s.0).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// `binky settings`.
pub async fn run(assignments: Vec<String>, json: bool, describe: bool) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    // Validate every assignment before writing any.
    let mut writes = Vec::new();
    for a in &assignments {
        let Some((k, v)) = a.split_once('=') else {
            return Err(Failure::usage(format!(
                "`{a}`: write KEY=VALUE, e.g. `binky settings max_parallel=8`"
            )));
        };
        let value = validate(k.trim(), v).map_err(Failure::usage)?;
        writes.push((k.trim().to_owned(), value));
    }
    for (k, v) in &writes {
        ctx.store.set_setting(k, v)?;
        println!("{k} = {v}");
    }
    if !writes.is_empty() {
        // Worlds look again (a raised limit admits queued ones); no daemon, nothing to do.
        let _ = crate::daemon::client::nudge(&ctx.home, None).await;
        return Ok(exit::OK);
    }
    let mut rows = Vec::new();
    for (key, default, what) in all() {
        let set = ctx.store.read(|c| store::setting(c, key))?;
        rows.push((
            key,
            set.clone().unwrap_or(default.clone()),
            set.is_none(),
            what,
        ));
    }
    if json {
        let v: serde_json::Map<String, serde_json::Value> = rows
            .iter()
            .map(|(k, v, _, _)| ((*k).to_owned(), serde_json::Value::String(v.clone())))
            .collect();
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(exit::OK);
    }
    for (k, v, default, what) in rows {
        if describe {
            println!(
                "{k} = {v}{}\n    {what}",
                if default { "  (default)" } else { "" }
            );
        } else {
            println!("{k} = {v}{}", if default { "  (default)" } else { "" });
        }
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::validate;

    #[test]
    fn values_are_checked_and_errors_say_what_the_key_takes() {
        assert_eq!(validate("max_parallel", "8").unwrap(), "8");
        assert!(validate("max_parallel", "-1")
            .unwrap_err()
            .contains("whole number"));
        assert!(validate("ram_reserve_percent", "95").is_err());
        assert_eq!(validate("cool_oldest", "on").unwrap(), "true");
        assert!(validate("proxy_port", "8080")
            .unwrap_err()
            .contains("binky port --proxy 8080"));
        assert!(validate("nope", "1").unwrap_err().contains("max_parallel"));
    }
}
