//! The JSON-lines trace: one object a line with the fields of
//! [`TraceEvent`]: `thread`, `time_ns` (since the Unix epoch), `action`
//! (rmm's words), `ptr`, `size`, `stream`, `device` (`"cuda:0"`) and, when
//! recorded, `frames` (`[{"function", "file", "line"}]`, innermost first).

use serde_json::{Map, Value, json};

use super::{Action, TraceEvent};
use crate::callsite::Frame;

pub(super) fn format_line(e: &TraceEvent) -> String {
    let mut object = json!({
        "thread": e.thread,
        "time_ns": e.time_ns,
        "action": e.action.as_str(),
        "ptr": e.ptr,
        "size": e.nbytes,
        "stream": e.stream,
    });
    if let Value::Object(map) = &mut object {
        if let Some(device) = e.device {
            map.insert("device".into(), Value::String(device.to_string()));
        }
        if !e.frames.is_empty() {
            let frames = e.frames.iter().map(frame_json).collect();
            map.insert("frames".into(), Value::Array(frames));
        }
    }
    let mut line = object.to_string();
    line.push('\n');
    line
}

fn frame_json(f: &Frame) -> Value {
    json!({ "function": f.function, "file": f.file, "line": f.line })
}

pub(super) fn parse_line(line: &str) -> Result<TraceEvent, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let Value::Object(map) = value else {
        return Err("not a JSON object".into());
    };
    let action = field(&map, "action")?
        .as_str()
        .and_then(Action::parse)
        .ok_or("\"action\" is not one of allocate, allocate failure, free")?;
    let device = match map.get("device") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(
            text.parse()
                .map_err(|e| format!("\"device\" {text:?} is not a device: {e}"))?,
        ),
        Some(other) => return Err(format!("\"device\" {other} is not a device name")),
    };
    let frames = match map.get("frames") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(frames)) => frames.iter().map(parse_frame).collect::<Result<_, _>>()?,
        Some(_) => return Err("\"frames\" is not a list".into()),
    };
    Ok(TraceEvent {
        line: 0,
        thread: unsigned(&map, "thread")?,
        time_ns: unsigned(&map, "time_ns")?,
        action,
        ptr: address(&map, "ptr")?,
        nbytes: address(&map, "size")?,
        stream: address(&map, "stream")?,
        device,
        frames,
    })
}

fn field<'a>(map: &'a Map<String, Value>, name: &str) -> Result<&'a Value, String> {
    map.get(name).ok_or_else(|| format!("no {name:?} field"))
}

fn unsigned(map: &Map<String, Value>, name: &str) -> Result<u64, String> {
    field(map, name)?
        .as_u64()
        .ok_or_else(|| format!("{name:?} is not a non-negative integer"))
}

fn address(map: &Map<String, Value>, name: &str) -> Result<usize, String> {
    usize::try_from(unsigned(map, name)?).map_err(|_| format!("{name:?} does not fit in usize"))
}

fn parse_frame(value: &Value) -> Result<Frame, String> {
    let bad = || format!("frame {value} is not {{\"function\", \"file\", \"line\"}}");
    let map = value.as_object().ok_or_else(bad)?;
    Ok(Frame {
        function: map
            .get("function")
            .and_then(Value::as_str)
            .ok_or_else(bad)?
            .to_owned(),
        file: map.get("file").and_then(Value::as_str).map(str::to_owned),
        line: map
            .get("line")
            .and_then(Value::as_u64)
            .and_then(|l| u32::try_from(l).ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_with_device_and_frames() {
        let event = TraceEvent {
            line: 0,
            thread: 9,
            time_ns: 1_700_000_000_000_000_000,
            action: Action::Free,
            ptr: 0xdead_0000,
            nbytes: 4096,
            stream: 0x10,
            device: Some("cuda:1".parse().unwrap()),
            frames: vec![Frame {
                function: "app::step".into(),
                file: Some("src/app.rs".into()),
                line: Some(7),
            }],
        };
        let line = format_line(&event);
        assert!(line.ends_with('\n'));
        assert_eq!(parse_line(&line), Ok(event));
    }

    #[test]
    fn missing_and_wrong_fields_are_named() {
        let e = parse_line(r#"{"thread":1,"time_ns":1,"action":"free","ptr":1,"stream":0}"#);
        assert_eq!(e.unwrap_err(), "no \"size\" field");
        let e =
            parse_line(r#"{"thread":1,"time_ns":1,"action":"grab","ptr":1,"size":1,"stream":0}"#);
        assert!(e.unwrap_err().contains("\"action\""));
        let e =
            parse_line(r#"{"thread":-1,"time_ns":1,"action":"free","ptr":1,"size":1,"stream":0}"#);
        assert!(e.unwrap_err().contains("\"thread\""));
        assert!(parse_line("[1]").unwrap_err().contains("not a JSON object"));
        let e = parse_line(
            r#"{"thread":1,"time_ns":1,"action":"free","ptr":1,"size":1,"stream":0,"device":"gpu"}"#,
        );
        assert!(e.unwrap_err().contains("\"device\""));
    }
}
