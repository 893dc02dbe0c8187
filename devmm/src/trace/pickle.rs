//! The few pickle opcodes (protocol 2) a PyTorch memory snapshot needs:
//! dicts, lists, tuples, strings, integers, and booleans.
//! Python's `pickle.load` reads the result; nothing here reads pickles.

/// A Python value to pickle.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Bool(bool),
    Int(i128),
    Str(String),
    List(Vec<Value>),
    Tuple(Vec<Value>),
    Dict(Vec<(String, Value)>),
}

impl Value {
    pub(crate) fn str(text: impl Into<String>) -> Value {
        Value::Str(text.into())
    }

    pub(crate) fn int(n: impl Into<i128>) -> Value {
        Value::Int(n.into())
    }

    /// A `usize` as a Python int (a usize always fits an i128).
    pub(crate) fn size(n: usize) -> Value {
        Value::Int(n as i128)
    }

    pub(crate) fn dict(entries: Vec<(&str, Value)>) -> Value {
        Value::Dict(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        )
    }
}

/// `pickle.dumps(value, protocol=2)`, in effect.
pub(crate) fn dumps(value: &Value) -> Vec<u8> {
    let mut out = vec![0x80, 2];
    write(value, &mut out);
    out.push(b'.');
    out
}

fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Bool(true) => out.push(0x88),
        Value::Bool(false) => out.push(0x89),
        Value::Int(n) => write_int(*n, out),
        Value::Str(s) => write_str(s, out),
        Value::List(items) => {
            out.push(b']');
            if !items.is_empty() {
                out.push(b'(');
                items.iter().for_each(|item| write(item, out));
                out.push(b'e');
            }
        }
        Value::Tuple(items) => {
            out.push(b'(');
            items.iter().for_each(|item| write(item, out));
            out.push(b't');
        }
        Value::Dict(entries) => {
            out.push(b'}');
            if !entries.is_empty() {
                out.push(b'(');
                for (key, value) in entries {
                    write_str(key, out);
                    write(value, out);
                }
                out.push(b'u');
            }
        }
    }
}

fn write_str(s: &str, out: &mut Vec<u8>) {
    out.push(b'X');
    // Strings here are paths and names, far below 4 GiB.
    let len = u32::try_from(s.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&s.as_bytes()[..len as usize]);
}

fn write_int(n: i128, out: &mut Vec<u8>) {
    if let Ok(small) = i32::try_from(n) {
        out.push(b'J');
        out.extend_from_slice(&small.to_le_bytes());
        return;
    }
    // LONG1: a length byte, then two's complement little-endian, as short
    // as keeps the sign.
    let bytes = n.to_le_bytes();
    let mut len = bytes.len();
    while len > 1 {
        let top = bytes[len - 1];
        let next_sign = bytes[len - 2] & 0x80;
        if (top == 0 && next_sign == 0) || (top == 0xff && next_sign != 0) {
            len -= 1;
        } else {
            break;
        }
    }
    out.push(0x8a);
    out.push(len as u8);
    out.extend_from_slice(&bytes[..len]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_match_pythons_pickler() {
        // pickle.dumps({"a": [1, True]}, protocol=2) with the memo opcodes
        // left out (they only name shared objects, which we never have).
        let value = Value::dict(vec![(
            "a",
            Value::List(vec![Value::int(1), Value::Bool(true)]),
        )]);
        let bytes = dumps(&value);
        assert_eq!(
            bytes,
            b"\x80\x02}(X\x01\x00\x00\x00a](J\x01\x00\x00\x00\x88eu.".to_vec()
        );
    }

    #[test]
    fn big_integers_use_long1() {
        let mut out = Vec::new();
        write_int(0x7f8a_4000_0000, &mut out);
        assert_eq!(out, b"\x8a\x06\x00\x00\x00\x40\x8a\x7f");
        out.clear();
        write_int(1 << 31, &mut out);
        // 0x80000000 needs a zero byte above it to stay positive.
        assert_eq!(out, b"\x8a\x05\x00\x00\x00\x80\x00");
        out.clear();
        write_int(-(1 << 40), &mut out);
        assert_eq!(out, b"\x8a\x06\x00\x00\x00\x00\x00\xff");
    }
}
