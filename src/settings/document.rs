//! TOML documents as ordered `Value`s, so that "later wins" rules follow the file, not the
//! alphabet (toml's own tables are sorted unless `preserve_order` is on).

use std::path::Path;

use toml::de::{DeTable, DeValue};

/// A TOML value, with tables in document order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Str(String),
    // i128 so that every TOML integer, including large hex ones, fits without a panic.
    Int(i128),
    Bool(bool),
    Array(Vec<Value>),
    Table(Table),
    /// Floats, date-times: fabrik never wants them, so only their kind is kept for messages.
    Other(&'static str),
}

pub(crate) type Table = Vec<(String, Value)>;

impl Value {
    pub(crate) fn type_name(&self) -> String {
        match self {
            Value::Str(s) => format!("the string \"{s}\""),
            Value::Int(n) => format!("the number {n}"),
            Value::Bool(b) => format!("{b}"),
            Value::Array(_) => "a list".to_string(),
            Value::Table(_) => "a table".to_string(),
            Value::Other(kind) => (*kind).to_string(),
        }
    }
}

/// Why a file could not be used at all.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileError {
    #[error("cannot read the file ({0}): check that it is a readable UTF-8 text file")]
    Read(std::io::Error),
    #[error("the file is {0} bytes, more than fabrik reads (1 MiB): is this the right file?")]
    TooLarge(u64),
    #[error(
        "TOML syntax error at line {line}, column {column}: {message}: fix the syntax there; \
         until then this file is ignored"
    )]
    Syntax { line: usize, column: usize, message: String },
}

const MAX_FILE_BYTES: u64 = 1 << 20;

/// Reads and parses a file; `Ok(None)` when it does not exist, which is never a problem.
pub(crate) fn read_document(path: &Path) -> Result<Option<Table>, FileError> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(FileError::Read(e)),
        Ok(meta) if meta.is_file() && meta.len() > MAX_FILE_BYTES => {
            return Err(FileError::TooLarge(meta.len()));
        }
        Ok(_) => {}
    }
    let text = std::fs::read_to_string(path).map_err(FileError::Read)?;
    parse_document(&text).map(Some)
}

pub(crate) fn parse_document(text: &str) -> Result<Table, FileError> {
    match DeTable::parse(text) {
        Ok(table) => Ok(convert_table(table.get_ref())),
        Err(e) => {
            let (line, column) = position(text, e.span().map_or(0, |s| s.start));
            Err(FileError::Syntax { line, column, message: e.message().trim().replace('\n', "; ") })
        }
    }
}

/// 1-based line and column (in characters) of a byte offset, tolerant of any offset.
pub(super) fn position(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

fn convert_table(table: &DeTable<'_>) -> Table {
    let mut entries: Vec<(usize, String, Value)> =
        table.iter().map(|(k, v)| (k.span().start, k.get_ref().to_string(), convert(v.get_ref()))).collect();
    entries.sort_by_key(|(at, _, _)| *at);
    entries.into_iter().map(|(_, k, v)| (k, v)).collect()
}

fn convert(value: &DeValue<'_>) -> Value {
    match value {
        DeValue::String(s) => Value::Str(s.to_string()),
        DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix())
            .map(Value::Int)
            .unwrap_or(Value::Other("a number too large to use")),
        DeValue::Float(_) => Value::Other("a decimal number"),
        DeValue::Boolean(b) => Value::Bool(*b),
        DeValue::Datetime(_) => Value::Other("a date-time"),
        DeValue::Array(items) => Value::Array(items.iter().map(|v| convert(v.get_ref())).collect()),
        DeValue::Table(t) => Value::Table(convert_table(t)),
    }
}
