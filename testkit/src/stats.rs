//! The statistics the benchmark results report: median, p90, the JSON summary of a series,
//! ratios.

use std::time::Duration;

use serde_json::{json, Value};

/// Write the JSON results to `path` (pretty, a newline at the end) and say so on stdout.
pub fn write_json(path: &std::path::Path, results: &Value) -> crate::Res<()> {
    let text = serde_json::to_string_pretty(results).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

/// [`write_json`] of a benchmark's results, with what every results file has beside them:
/// `benchmark` (its name), `machine` and `loadavg_at_end` (now).
pub fn write_results(
    path: &std::path::Path,
    benchmark: &str,
    machine: &Value,
    mut results: Value,
) -> crate::Res<()> {
    if let Some(r) = results.as_object_mut() {
        r.insert("benchmark".into(), json!(benchmark));
        r.insert("machine".into(), machine.clone());
        r.insert("loadavg_at_end".into(), json!(crate::procs::loadavg()));
    }
    write_json(path, &results)
}

/// A duration in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A sorted copy.
pub fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s
}

/// The median (NaN for none).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let s = sorted(v);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// 90th percentile, nearest rank: the `ceil(0.9 n)`-th smallest (the 18th of 20).
pub fn p90(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let s = sorted(v);
    let rank = ((0.9 * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

/// A series as the JSON results record it: median, min, max, n and the samples (an empty
/// series gives nulls and `n: 0`).
pub fn summary(v: &[f64]) -> Value {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    json!({ "median": median(v), "min": min, "max": max, "n": v.len(), "samples": v })
}

/// [`summary`] with the 90th percentile as well.
pub fn summary_p90(v: &[f64]) -> Value {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    json!({ "median": median(v), "p90": p90(v), "min": min, "max": max, "n": v.len(), "samples": v })
}

/// `a / b` with three decimals, "n/a" when either is missing or `b` is not positive.
pub fn ratio(a: f64, b: f64) -> String {
    ratio_places(a, b, 3)
}

/// [`ratio`] with `places` decimals.
pub fn ratio_places(a: f64, b: f64, places: usize) -> String {
    if b.is_nan() || a.is_nan() || b <= 0.0 {
        "n/a".into()
    } else {
        format!("{:.places$}", a / b)
    }
}

/// `a / b` for the JSON results: null when either is missing or `b` is not positive.
pub fn ratio_value(a: f64, b: f64) -> Value {
    if b.is_nan() || a.is_nan() || b <= 0.0 {
        Value::Null
    } else {
        json!(a / b)
    }
}
