//! Plain-text tables with aligned columns.

/// How a column's cells line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// A table of text cells, rendered with two spaces between columns under a
/// header line. The last column is never padded, so long cells
/// (resource chains, error messages) do not leave trailing blanks.
#[derive(Debug)]
pub(crate) struct Table {
    columns: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these column headers.
    pub(crate) fn new(columns: &[(&'static str, Align)]) -> Table {
        Table {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; missing cells are blank, extra cells are dropped.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        let mut cells = cells;
        cells.resize(self.columns.len(), String::new());
        self.rows.push(cells);
    }

    /// The table as lines of text, each ending in a newline.
    pub(crate) fn render(&self) -> String {
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, (header, _))| {
                self.rows
                    .iter()
                    .map(|row| row[i].chars().count())
                    .chain([header.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let headers: Vec<String> = self.columns.iter().map(|(h, _)| (*h).to_owned()).collect();
        let mut text = String::new();
        for row in std::iter::once(&headers).chain(&self.rows) {
            let last = row.len().saturating_sub(1);
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, cell)| match self.columns[i].1 {
                    Align::Right => format!("{cell:>w$}", w = widths[i]),
                    Align::Left if i == last => cell.clone(),
                    Align::Left => format!("{cell:<w$}", w = widths[i]),
                })
                .collect();
            text.push_str(cells.join("  ").trim_end());
            text.push('\n');
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_numbers_align_right() {
        let mut t = Table::new(&[
            ("NAME", Align::Left),
            ("SIZE", Align::Right),
            ("NOTE", Align::Left),
        ]);
        t.row(vec!["a".into(), "1".into(), "short".into()]);
        t.row(vec!["longer".into(), "1000".into()]);
        assert_eq!(
            t.render(),
            "NAME    SIZE  NOTE\n\
             a          1  short\n\
             longer  1000\n"
        );
    }
}
