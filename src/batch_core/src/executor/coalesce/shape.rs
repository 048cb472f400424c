//! Statement parsing: which SQL texts are coalescible single-row INSERTs ([`parse_insert`]),
//! the multi-row statement of a shape ([`Shape::sql`]), and the comparison of SQL texts the
//! executor and the planner make for every op ([`same_text`]).

/// A parsed single-row INSERT that can be coalesced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shape {
    /// The table as written in the SQL (quotes kept).
    pub(super) table_sql: String,
    /// The table's name without quotes.
    pub(super) table: String,
    /// The column list as written (without parentheses).
    pub(super) columns_sql: String,
    /// The column names without quotes.
    pub(super) columns: Vec<String>,
}

impl Shape {
    /// Parameters per row.
    pub(super) fn params(&self) -> usize {
        self.columns.len()
    }

    /// The multi-row statement for `rows` rows.
    pub(super) fn sql(&self, rows: usize) -> String {
        let row = format!("({})", vec!["?"; self.params()].join(","));
        let mut sql = format!(
            "INSERT OR FAIL INTO {} ({}) VALUES ",
            self.table_sql, self.columns_sql
        );
        for r in 0..rows {
            if r > 0 {
                sql.push(',');
            }
            sql.push_str(&row);
        }
        sql
    }
}

/// Parses `sql` as a coalescible single-row INSERT (see the module documentation).
pub(crate) fn parse_insert(sql: &str) -> Option<Shape> {
    let mut p = Parser { s: sql, i: 0 };
    p.keyword("INSERT")?;
    p.keyword("INTO")?;
    let (table_sql, table) = p.identifier()?;
    p.symbol('(')?;
    let columns_start = p.i;
    let mut columns = vec![p.identifier()?.1];
    while p.try_symbol(',') {
        columns.push(p.identifier()?.1);
    }
    let columns_sql = sql[columns_start..p.i].trim().to_owned();
    p.symbol(')')?;
    p.keyword("VALUES")?;
    p.symbol('(')?;
    let mut numbered = None;
    let mut count = 0;
    loop {
        p.skip_space();
        let rest = &sql[p.i..];
        if !rest.starts_with('?') {
            return None;
        }
        let digits = rest[1..].bytes().take_while(u8::is_ascii_digit).count();
        p.i += 1 + digits;
        count += 1;
        let is_numbered = digits > 0;
        if *numbered.get_or_insert(is_numbered) != is_numbered {
            return None;
        }
        if is_numbered && rest[1..=digits].parse::<usize>().ok()? != count {
            return None;
        }
        if !p.try_symbol(',') {
            break;
        }
    }
    p.symbol(')')?;
    p.try_symbol(';');
    p.skip_space();
    if p.i != sql.len() || count != columns.len() {
        return None;
    }
    Some(Shape {
        table_sql,
        table,
        columns_sql,
        columns,
    })
}

struct Parser<'s> {
    s: &'s str,
    i: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        let rest = &self.s[self.i..];
        self.i += rest.len() - rest.trim_start().len();
    }

    /// A keyword (case-insensitive) followed by a non-identifier character.
    fn keyword(&mut self, word: &str) -> Option<()> {
        self.skip_space();
        let rest = &self.s.as_bytes()[self.i..];
        if rest.len() < word.len() || !rest[..word.len()].eq_ignore_ascii_case(word.as_bytes()) {
            return None;
        }
        if rest.get(word.len()).is_some_and(|&b| is_ident_byte(b)) {
            return None;
        }
        self.i += word.len();
        Some(())
    }

    fn symbol(&mut self, c: char) -> Option<()> {
        self.try_symbol(c).then_some(())
    }

    fn try_symbol(&mut self, c: char) -> bool {
        self.skip_space();
        if self.s[self.i..].starts_with(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// A plain identifier, or one in double quotes without doubled quotes inside; returns it
    /// as written and unquoted. A qualified name (`main.t`) is not accepted.
    fn identifier(&mut self) -> Option<(String, String)> {
        self.skip_space();
        let rest = &self.s[self.i..];
        let (written, name) = if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"')?;
            if quoted[end + 1..].starts_with('"') || end == 0 {
                return None;
            }
            (&rest[..end + 2], &quoted[..end])
        } else {
            let len = rest.bytes().take_while(|&b| is_ident_byte(b)).count();
            if len == 0 || rest.as_bytes()[0].is_ascii_digit() || !rest.is_char_boundary(len) {
                return None;
            }
            (&rest[..len], &rest[..len])
        };
        self.i += written.len();
        if self.s[self.i..].trim_start().starts_with('.') {
            return None;
        }
        Some((written.to_owned(), name.to_owned()))
    }
}

pub(super) fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// Whether two SQL texts are equal, compared eight bytes at a time: a batch compares every
/// op's text with its neighbour's, and `memcmp` in a wasm build compares byte by byte (about
/// ten times the instructions).
pub(crate) fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    if std::ptr::eq(a, b) {
        return true;
    }
    let (mut x, mut y) = (a.chunks_exact(8), b.chunks_exact(8));
    let word = |bytes: &[u8]| u64::from_ne_bytes(bytes.try_into().expect("eight bytes"));
    (&mut x).zip(&mut y).all(|(p, q)| word(p) == word(q)) && x.remainder() == y.remainder()
}
