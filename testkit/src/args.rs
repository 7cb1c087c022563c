//! The benchmarks' command lines: `--flag value` or `--flag=value`, `--bench` (which `cargo
//! bench` passes to `harness = false` targets) ignored, `-h`/`--help` printing the usage.

use std::ops::RangeInclusive;
use std::path::PathBuf;

use crate::Res;

/// The flags of this process's command line, one at a time.
pub struct Flags {
    args: std::vec::IntoIter<String>,
    usage: &'static str,
    inline: Option<String>,
}

impl Flags {
    /// This process's arguments; `usage` is printed for `--help` and after every error.
    pub fn from_env(usage: &'static str) -> Flags {
        Flags::new(std::env::args().skip(1).collect(), usage)
    }

    /// Flags from `args` (without the program name).
    pub fn new(args: Vec<String>, usage: &'static str) -> Flags {
        Flags {
            args: args.into_iter(),
            usage,
            inline: None,
        }
    }

    /// The next flag (`--name=value` gives `--name`, its value kept for [`Flags::value`]).
    /// `--help` prints the usage and exits 0.
    pub fn next_flag(&mut self) -> Option<String> {
        loop {
            let arg = self.args.next()?;
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
                _ => (arg, None),
            };
            self.inline = inline;
            match flag.as_str() {
                "--bench" => continue,
                "-h" | "--help" => {
                    println!("{}", self.usage);
                    std::process::exit(0);
                }
                _ => return Some(flag),
            }
        }
    }

    /// The value of flag `name`: after `=`, else the next argument.
    pub fn value(&mut self, name: &str) -> Res<String> {
        self.inline
            .take()
            .or_else(|| self.args.next())
            .ok_or_else(|| format!("{name} needs a value\n{}", self.usage))
    }

    /// The value of flag `name` as a whole number in `range`.
    pub fn number_in(&mut self, name: &str, range: RangeInclusive<usize>) -> Res<usize> {
        let v = self.value(name)?;
        v.parse::<usize>()
            .ok()
            .filter(|n| range.contains(n))
            .ok_or_else(|| {
                format!(
                    "{name}: `{v}` is not a number from {} to {}",
                    range.start(),
                    range.end()
                )
            })
    }

    /// The value of flag `name` as a positive whole number (`zero_ok`: or 0).
    pub fn positive(&mut self, name: &str, zero_ok: bool) -> Res<usize> {
        let v = self.value(name)?;
        v.parse::<usize>()
            .ok()
            .filter(|n| zero_ok || *n > 0)
            .ok_or_else(|| format!("{name}: `{v}` is not a positive number"))
    }

    /// The value of flag `name` as a comma-separated list (items trimmed, empty ones dropped).
    pub fn list(&mut self, name: &str) -> Res<Vec<String>> {
        Ok(self
            .value(name)?
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect())
    }

    /// Give every flag to `take` (with these flags, for its value); a flag `take` does not
    /// know (it returns `Ok(false)`) is an error, as is any error of `take`. Every
    /// benchmark's `--json PATH` (also write the results as JSON) is taken here: the answer is
    /// its path.
    pub fn each(
        mut self,
        mut take: impl FnMut(&mut Flags, &str) -> Res<bool>,
    ) -> Res<Option<PathBuf>> {
        let mut json = None;
        while let Some(flag) = self.next_flag() {
            if flag == "--json" {
                json = Some(PathBuf::from(self.value("--json")?));
            } else if !take(&mut self, &flag)? {
                return Err(self.unknown(&flag));
            }
        }
        Ok(json)
    }

    /// The error for an argument no flag matches.
    pub fn unknown(&self, arg: &str) -> String {
        format!("unknown argument `{arg}`\n{}", self.usage)
    }
}

/// The parsed flags, or their error on stderr and exit 2.
pub fn or_exit<T>(parsed: Res<T>) -> T {
    parsed.unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    })
}

/// A benchmark's end: on an error, `<name> benchmark failed: <error>` on stderr and exit 1.
pub fn exit_on_failure(name: &str, outcome: Res<()>) {
    if let Err(e) = outcome {
        eprintln!("{name} benchmark failed: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(args: &[&str]) -> Flags {
        Flags::new(args.iter().map(|s| (*s).to_owned()).collect(), "usage")
    }

    #[test]
    fn values_come_after_an_equals_sign_or_as_the_next_argument_and_bench_is_skipped() {
        let mut f = flags(&["--bench", "--worlds=3", "--json", "out.json", "--x"]);
        assert_eq!(f.next_flag().as_deref(), Some("--worlds"));
        assert_eq!(f.number_in("--worlds", 1..=99), Ok(3));
        assert_eq!(f.next_flag().as_deref(), Some("--json"));
        assert_eq!(f.value("--json").as_deref(), Ok("out.json"));
        assert_eq!(f.next_flag().as_deref(), Some("--x"));
        assert_eq!(f.unknown("--x"), "unknown argument `--x`\nusage");
        assert_eq!(f.next_flag(), None);
    }

    #[test]
    fn each_flag_goes_to_the_taker_and_an_unknown_one_is_an_error() {
        let mut seen = Vec::new();
        let json = flags(&["--json=out.json", "--x"]).each(|_, flag| Ok(flag == "--x"));
        assert_eq!(json, Ok(Some(PathBuf::from("out.json"))));
        let r = flags(&["--bench", "--only= a, ,b,", "--x", "--y"]).each(|f, flag| {
            match flag {
                "--only" => seen.extend(f.list("--only")?),
                "--x" => seen.push("x".to_owned()),
                _ => return Ok(false),
            }
            Ok(true)
        });
        assert_eq!(r, Err("unknown argument `--y`\nusage".into()));
        assert_eq!(seen, ["a", "b", "x"]);
        let r = flags(&["--only"]).each(|f, _| f.list("--only").map(|_| true));
        assert_eq!(r, Err("--only needs a value\nusage".into()));
    }

    #[test]
    fn a_missing_or_out_of_range_value_says_so() {
        let mut f = flags(&["--worlds"]);
        f.next_flag();
        assert_eq!(
            f.value("--worlds"),
            Err("--worlds needs a value\nusage".into())
        );
        let mut f = flags(&["--worlds=0", "--runs=0"]);
        f.next_flag();
        assert_eq!(
            f.number_in("--worlds", 1..=99),
            Err("--worlds: `0` is not a number from 1 to 99".into())
        );
        f.next_flag();
        assert_eq!(
            f.positive("--runs", false),
            Err("--runs: `0` is not a positive number".into())
        );
    }
}
