//! Plain-text tables: the first row is the header, underlined with dashes; the first column
//! is left-aligned, the others right-aligned, two spaces apart.

use std::fmt::Write as _;

/// Milliseconds for a table cell: whole above 100 ms, one decimal below, "n/a" for none.
pub fn fmt_ms(v: f64) -> String {
    if v.is_nan() {
        "n/a".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

/// A target met or not, for a table cell.
pub fn verdict(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "NO"
    }
}

/// The columns of a bench comparing binky with binky 0.1.2 by median and p90.
pub const MEDIAN_P90_COLUMNS: [&str; 5] = [
    "binky median",
    "binky p90",
    "0.1.2 median",
    "0.1.2 p90",
    "ratio (medians)",
];

/// A table of text cells; [`Table::render`] lays it out.
pub struct Table {
    /// The header, then the rows.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with this header.
    pub fn new(header: &[&str]) -> Table {
        Table {
            rows: vec![header.iter().map(|s| (*s).to_owned()).collect()],
        }
    }

    /// A table whose header is `first`, then `columns`, then `last`.
    pub fn with_columns(first: &str, columns: &[&str], last: &[&str]) -> Table {
        Table::new(&[&[first][..], columns, last].concat())
    }

    /// Add a row.
    pub fn row(&mut self, cells: &[&str]) {
        self.rows
            .push(cells.iter().map(|c| (*c).to_owned()).collect());
    }

    /// Add a row of owned cells.
    pub fn row_owned(&mut self, cells: &[String]) {
        self.rows.push(cells.to_vec());
    }

    /// The table as text, a line a row.
    pub fn render(&self) -> String {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut w = vec![0usize; cols];
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut s = String::new();
        for (n, r) in self.rows.iter().enumerate() {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate() {
                let pad = w[i] - c.chars().count();
                if i == 0 {
                    let _ = write!(line, "{c}{}", " ".repeat(pad));
                } else {
                    let _ = write!(line, "  {}{c}", " ".repeat(pad));
                }
            }
            let _ = writeln!(s, "{}", line.trim_end());
            if n == 0 {
                let total: usize = w.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
                let _ = writeln!(s, "{}", "-".repeat(total));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_are_whole_from_100_and_have_one_decimal_below() {
        assert_eq!(fmt_ms(f64::NAN), "n/a");
        assert_eq!(fmt_ms(99.94), "99.9 ms");
        assert_eq!(fmt_ms(99.96), "100.0 ms");
        assert_eq!(fmt_ms(100.0), "100 ms");
        assert_eq!(fmt_ms(1234.5), "1234 ms");
        assert_eq!(fmt_ms(-150.4), "-150 ms");
        assert_eq!(fmt_ms(0.04), "0.0 ms");
        assert_eq!(verdict(true), "yes");
        assert_eq!(verdict(false), "NO");
    }

    #[test]
    fn the_header_is_underlined_and_the_columns_aligned() {
        let mut t = Table::new(&["name", "ms"]);
        t.row(&["a", "1.5"]);
        t.row_owned(&["long".into(), "10".into()]);
        assert_eq!(t.render(), "name   ms\n---------\na     1.5\nlong   10\n");
        let t = Table::with_columns("a", &["b", "c"], &["d"]);
        assert_eq!(t.rows, [["a", "b", "c", "d"]]);
    }
}
