//! Rules for text that crosses the wire. PostgreSQL `text` and `jsonb` cannot hold a NUL
//! character, so every field with one is refused at the edge, naming the field.

use serde_json::Value;

/// The path (`runs[0].log`, `machine.cpu`; `$` for the document itself) of the first string
/// or object key in `value` that holds a NUL character.
pub fn find_nul(value: &Value) -> Option<String> {
    fn walk(value: &Value, path: &str) -> Option<String> {
        let here = |p: &str| {
            if p.is_empty() {
                "$".to_string()
            } else {
                p.to_string()
            }
        };
        match value {
            Value::String(s) if s.contains('\0') => Some(here(path)),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .find_map(|(i, v)| walk(v, &format!("{path}[{i}]"))),
            Value::Object(o) => o.iter().find_map(|(k, v)| {
                let key = k.replace('\0', "\\0");
                let p = if path.is_empty() {
                    key
                } else {
                    format!("{path}.{key}")
                };
                if k.contains('\0') {
                    Some(p)
                } else {
                    walk(v, &p)
                }
            }),
            _ => None,
        }
    }
    walk(value, "")
}

#[cfg(test)]
mod tests {
    use super::find_nul;
    use serde_json::json;

    #[test]
    fn names_the_field_with_a_nul() {
        assert_eq!(
            find_nul(&json!({"a": "ok", "b": [1, "x\u{0}"]})).as_deref(),
            Some("b[1]")
        );
        assert_eq!(
            find_nul(&json!({"m": {"k\u{0}": 1}})).as_deref(),
            Some("m.k\\0")
        );
        assert_eq!(find_nul(&json!("\u{0}")).as_deref(), Some("$"));
        assert_eq!(find_nul(&json!({"a": "fine"})), None);
    }
}
