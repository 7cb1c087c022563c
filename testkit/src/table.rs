//! Plain-text tables: the first row is the header, underlined with dashes; the first column
//! is left-aligned, the others right-aligned, two spaces apart.

use std::fmt::Write as _;

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
