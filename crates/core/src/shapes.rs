//! The row shapes the API returns, each defined once here (or, for the upstream link row, in
//! `upstream/rows.rs`) with [`row_shape!`], which also lists the fields in the JavaScript
//! API's spelling (`FIELDS`). The binding builds its object of each from the core's in one
//! place, and a test checks the TypeScript types against `FIELDS`, so a field added here and
//! not there (or there and not here) fails.

/// Defines a row struct and its `FIELDS`: each field is written `pub name: Type = "jsName",`.
macro_rules! row_shape {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty = $js:literal, )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// The fields in the JavaScript API's spelling, in declaration order.
            pub const FIELDS: &'static [&'static str] = &[$($js),*];
        }
    };
}
pub(crate) use row_shape;

row_shape! {
    /// One cursor row, every column as stored (`cursorRows`; `inspectDatabase` shows it with
    /// the target's version and the watcher's lag).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CursorRow {
        /// The watching session.
        pub watcher: String = "watcherKey",
        /// The watched session.
        pub target: String = "targetKey",
        /// L: the acknowledged position.
        pub last_seen: i64 = "lastSeen",
        /// N: the frozen notified position.
        pub notified: i64 = "notified",
        /// M: the latest material event.
        pub material: i64 = "material",
        /// The provenance, as stored.
        pub provenance: String = "provenance",
        /// The watcher's scope (OpenClaw's `watcher_store_path`), when the row has one.
        pub scope: Option<String> = "scope",
        /// Last write of the row (epoch ms).
        pub updated_at: i64 = "updatedAt",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_follow_the_declaration() {
        assert_eq!(
            CursorRow::FIELDS,
            [
                "watcherKey",
                "targetKey",
                "lastSeen",
                "notified",
                "material",
                "provenance",
                "scope",
                "updatedAt"
            ]
        );
    }
}
