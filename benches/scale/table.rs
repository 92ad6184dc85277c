//! Markdown tables (columns padded, so they read in a terminal too) and
//! the figures' formatting.

/// A table: a header row and rows of the same width.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: Vec<String>) -> Self {
        Self { rows: vec![header] }
    }

    pub fn row(&mut self, row: Vec<String>) {
        assert_eq!(row.len(), self.rows[0].len(), "a row as wide as the header");
        self.rows.push(row);
    }

    /// Prints the table as Markdown.
    pub fn print(&self) {
        let columns = self.rows[0].len();
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| r[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(cell, &width)| {
                    let pad = width - cell.chars().count();
                    format!("{cell}{}", " ".repeat(pad))
                })
                .collect();
            println!("| {} |", padded.join(" | "));
        };
        line(&self.rows[0]);
        let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w.max(3))).collect();
        println!(
            "|{}|",
            rule.iter()
                .map(|r| format!("-{r}-"))
                .collect::<Vec<_>>()
                .join("|")
        );
        for row in &self.rows[1..] {
            line(row);
        }
    }
}

/// The median (the mean of the middle two for an even count).
pub fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    assert!(!values.is_empty(), "a median of something");
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// `x` rounded, with a space between thousands (`16 796`).
pub fn spaced(x: f64) -> String {
    let digits = format!("{:.0}", x.abs());
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if x < 0.0 && digits != "0" {
        out.push('-');
    }
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(digit);
    }
    out
}
