//! Naming leaf columns: the Parquet leaf paths of an Arrow schema ([`leaf_paths`]), the dotted
//! paths a user writes for them (list wrapper levels left out), and whether a path runs through
//! structs only (what bloom filters silt builds and sort keys can address).
//!
//! Touches nothing: it only computes.

use arrow::datatypes::{DataType, Schema};

/// Leaf columns as `(user path, Parquet path, Arrow type)`: the user path joins struct field
/// names with dots and leaves out the list wrapper levels, so `tags` names the elements of the
/// list column `tags` (Parquet path `tags.list.item`).
pub(super) fn addressable_leaves(schema: &Schema) -> Vec<(String, Vec<String>, DataType)> {
    leaf_paths(schema)
        .into_iter()
        .map(|(path, dt)| {
            let mut user: Vec<&str> = Vec::new();
            let mut i = 0;
            while i < path.len() {
                // `list` + element name are the wrapper levels leaf_paths adds for a list.
                if i > 0
                    && path[i] == "list"
                    && i + 1 < path.len()
                    && is_list_at(schema, &path[..i])
                {
                    i += 2;
                    continue;
                }
                user.push(&path[i]);
                i += 1;
            }
            (user.join("."), path.clone(), dt)
        })
        .collect()
}

/// Whether the field at a Parquet path prefix (struct names only, plus list wrappers) is a list.
fn is_list_at(schema: &Schema, prefix: &[String]) -> bool {
    let mut dt: Option<&DataType> = None;
    let mut i = 0;
    while i < prefix.len() {
        let name = &prefix[i];
        let next = match dt {
            None => schema.field_with_name(name).ok().map(|f| f.data_type()),
            Some(DataType::Struct(fs)) => {
                fs.iter().find(|f| f.name() == name).map(|f| f.data_type())
            }
            Some(DataType::List(f)) | Some(DataType::LargeList(f)) if name == "list" => {
                i += 1; // skip the element name too
                Some(f.data_type())
            }
            Some(DataType::Map(f, _)) => Some(f.data_type()),
            _ => None,
        };
        match next {
            Some(n) => dt = Some(n),
            None => return false,
        }
        i += 1;
    }
    matches!(dt, Some(DataType::List(_)) | Some(DataType::LargeList(_)))
}

/// Whether every step of `path` above its leaf is a struct field (no list or map on the way).
pub(super) fn through_structs(schema: &Schema, path: &[String]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    let Ok(mut field) = schema.field_with_name(first) else {
        return false;
    };
    for name in rest {
        let DataType::Struct(children) = field.data_type() else {
            return false;
        };
        match children.iter().find(|c| c.name() == name) {
            Some(c) => field = c,
            None => return false,
        }
    }
    true
}

/// Parquet leaf column paths in schema order, with their Arrow types. Lists contribute
/// `name.list.element`-style paths that never equal a user's dotted path, so only struct
/// nesting is addressable by `a.b` (which is what bloom filters and sort keys need).
pub fn leaf_paths(schema: &Schema) -> Vec<(Vec<String>, DataType)> {
    fn walk(prefix: &mut Vec<String>, dt: &DataType, out: &mut Vec<(Vec<String>, DataType)>) {
        match dt {
            DataType::Struct(fields) => {
                for f in fields {
                    prefix.push(f.name().clone());
                    walk(prefix, f.data_type(), out);
                    prefix.pop();
                }
            }
            DataType::List(f) | DataType::LargeList(f) => {
                prefix.push("list".into());
                prefix.push(f.name().clone());
                walk(prefix, f.data_type(), out);
                prefix.pop();
                prefix.pop();
            }
            DataType::Map(f, _) => {
                prefix.push(f.name().clone());
                walk(prefix, f.data_type(), out);
                prefix.pop();
            }
            other => out.push((prefix.clone(), other.clone())),
        }
    }
    let mut out = Vec::new();
    for f in schema.fields() {
        let mut p = vec![f.name().clone()];
        walk(&mut p, f.data_type(), &mut out);
    }
    out
}
