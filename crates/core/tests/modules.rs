//! The module graph of the crate has no cycle: reading the sources, every `crate::` and
//! `super::` path outside the inline test modules is an edge from the file's module to the
//! module it names, and following the edges never comes back to where it started. The same
//! holds for the napi binding above the core (`src/`, read the same way) and for the
//! TypeScript layer (`lib/`), where every relative `import`/`export … from` (types included)
//! is an edge from the file to the file it names.
//!
//! What counts: every file is a node (`store`, `upstream::monitor`, `exclusive::linux`); a path
//! `crate::a::b::Item` names the longest known module prefix (`a::b`); a group
//! `crate::a::{b, Item}` names each member that is a module, else `a`; a path that names no
//! module (`crate::Store`, a re-export of the crate root) is an edge to the root; the root
//! re-exports every part, so no module but the root may have one. A parent's use of its own
//! children through local names (`mod linux; use linux as os;`, `pub use monitor::…`) is not
//! an edge, and `super::super::` is not followed (only test modules use it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The module of a source file, from its path under `src/`: `upstream/mod.rs` is `upstream`,
/// `lib.rs` is the root (`""`).
fn module_of(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts.join("::")
}

fn collect(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("src readable") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            collect(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            // `exclusive/tests.rs` is an inline test module kept in a file of its own.
            && path.file_stem().is_some_and(|s| s != "tests")
        {
            let rel = path.strip_prefix(root).expect("under src");
            let text = std::fs::read_to_string(&path).expect("source readable");
            out.insert(module_of(rel), text);
        }
    }
}

/// The code of a file that counts: up to its `#[cfg(test)] mod tests`, without comment lines,
/// with `use super::` inside an inline module (an indented line) read as the file's own.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|n| n.trim_start() == "mod tests {")
        {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        if line.starts_with(char::is_whitespace) && t.starts_with("use super::") {
            out.push_str(&line.replacen("use super::", "use self::", 1));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The module paths named by `crate::` and `super::` paths in `code` of module `me`.
fn named(me: &str, code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (kw, parent) in [("crate::", false), ("super::", true)] {
        let mut from = 0;
        while let Some(i) = code[from..].find(kw).map(|i| i + from) {
            from = i + kw.len();
            if code[..i].chars().next_back().is_some_and(is_ident) {
                continue;
            }
            let mut base: Vec<String> = if parent {
                let mut m: Vec<String> = me.split("::").map(str::to_owned).collect();
                m.pop();
                m
            } else {
                Vec::new()
            };
            let rest = &code[from..];
            let mut pos = 0;
            loop {
                let ident: String = rest[pos..].chars().take_while(|&c| is_ident(c)).collect();
                if ident.is_empty() {
                    break;
                }
                pos += ident.len();
                base.push(ident);
                if rest[pos..].starts_with("::") {
                    pos += 2;
                } else {
                    break;
                }
            }
            if rest[pos..].starts_with('{') {
                let group = &rest[pos + 1..rest[pos..].find('}').map_or(rest.len(), |e| pos + e)];
                for item in group.split(',') {
                    let first = item.trim().split("::").next().unwrap_or("").trim();
                    let mut path = base.clone();
                    if !first.is_empty() {
                        path.push(first.to_owned());
                    }
                    out.push(path);
                }
            } else {
                out.push(base);
            }
        }
    }
    out
}

/// The edges of the sources in `files` (module -> source text).
fn graph(files: &BTreeMap<String, String>) -> Graph {
    let mut g = Graph::new();
    for (me, text) in files {
        for path in named(me, &code(text)) {
            let target = (0..=path.len())
                .rev()
                .map(|n| path[..n].join("::"))
                .find(|m| files.contains_key(m))
                .unwrap_or_default();
            if &target != me {
                g.entry(me.clone()).or_default().insert(target);
            }
        }
    }
    g
}

/// A cycle of `g`, if it has one.
fn cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        u: &str,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|s| s == u) {
            let mut c = stack[at..].to_vec();
            c.push(u.to_owned());
            return Some(c);
        }
        if done.contains(u) {
            return None;
        }
        stack.push(u.to_owned());
        for v in g.get(u).into_iter().flatten() {
            if let Some(c) = visit(g, v, done, stack) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(u.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|u| visit(g, u, &mut done, &mut Vec::new()))
}

fn sources_of(root: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    collect(root, root, &mut files);
    files
}

fn sources() -> BTreeMap<String, String> {
    sources_of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

/// The repository's root, two levels above this crate.
fn repo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The TypeScript files under `dir` (module -> source text), each named by its path under
/// `root` without the extension: `session-state`, `openclaw/host`.
fn collect_ts(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("lib readable") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            collect_ts(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "ts" || e == "mts") {
            let rel = path
                .strip_prefix(root)
                .expect("under lib")
                .with_extension("");
            let name = rel.to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(&path).expect("source readable");
            // `index.ts` and `index.mts` are one module to the graph.
            out.entry(name).or_default().push_str(&text);
        }
    }
}

/// The edges of TypeScript sources: `from '<relative path>'` and `import('<relative path>')`
/// resolved against the importing file, kept when they name a file of the set (`../index.js`,
/// the generated loader outside `lib/`, is not one).
fn ts_graph(files: &BTreeMap<String, String>) -> Graph {
    let mut g = Graph::new();
    for (me, text) in files {
        let code: String = text
            .lines()
            .filter(|l| {
                let t = l.trim_start();
                !(t.starts_with("//") || t.starts_with('*') || t.starts_with("/*"))
            })
            .collect::<Vec<_>>()
            .join("\n");
        for (kw, close) in [("from '", '\''), ("import('", '\'')] {
            for (i, _) in code.match_indices(kw) {
                let rest = &code[i + kw.len()..];
                let Some(end) = rest.find(close) else {
                    continue;
                };
                let spec = &rest[..end];
                if !spec.starts_with("./") && !spec.starts_with("../") {
                    continue;
                }
                let mut parts: Vec<&str> = me.split('/').collect();
                parts.pop();
                let mut outside = false;
                for seg in spec.split('/') {
                    match seg {
                        "." => {}
                        // Above `lib/`: the generated loader, not a file of the set.
                        ".." => outside |= parts.pop().is_none(),
                        s => parts.push(s),
                    }
                }
                if outside {
                    continue;
                }
                let target = parts.join("/");
                let target = target
                    .strip_suffix(".js")
                    .or_else(|| target.strip_suffix(".mjs"))
                    .unwrap_or(&target)
                    .to_owned();
                if files.contains_key(&target) && &target != me {
                    g.entry(me.clone()).or_default().insert(target);
                }
            }
        }
    }
    g
}

#[test]
fn the_module_graph_is_acyclic() {
    let g = graph(&sources());
    assert_eq!(cycle(&g), None);
    // The parts of the store, as docs/architecture.md draws them.
    let deps = |m: &str| -> Vec<&str> {
        g.get(m)
            .map(|s| s.iter().map(String::as_str).collect())
            .unwrap_or_default()
    };
    assert_eq!(
        deps("sqlite::conn"),
        [
            "error",
            "hooks",
            "sqlite::changes",
            "sqlite::exclusive",
            "sqlite::read_cache"
        ]
    );
    // The change count under the read cache is a leaf of SQLite's folder.
    assert_eq!(deps("sqlite::changes"), ["error"]);
    // The delivery is the façade's, for every engine: it names no engine's module.
    assert_eq!(
        deps("delivery"),
        ["cursors", "error", "follow", "hooks", "keys", "metrics", "queue", "rows", "wake"]
    );
    // The counters are a leaf: every part may count, and they use no part.
    assert_eq!(deps("metrics"), ["error", "event"]);
    assert_eq!(deps("hooks"), ["error", "wake"]);
    assert!(!deps("sqlite::sync").contains(&"store"));
    assert!(!deps("sqlite::checkpoint").contains(&"store"));
    assert!(deps("store").contains(&"upstream::monitor"));
    // Nothing but the crate root itself reaches the root.
    for (m, to) in &g {
        assert!(
            m.is_empty() || !to.contains(""),
            "{m} uses a root re-export"
        );
    }
}

/// The façade's modules: `store` and the files under `store/`.
fn is_facade(m: &str) -> bool {
    m == "store" || m.starts_with("store::")
}

/// True for a module of one engine's folder.
fn is_engine_folder(m: &str) -> bool {
    ["sqlite", "postgres"]
        .iter()
        .any(|e| m == *e || m.starts_with(&format!("{e}::")))
}

#[test]
fn the_facade_reaches_storage_through_the_engine_interface() {
    // docs/architecture.md, "The engine interface": the façade names one engine module of
    // each folder, the one it opens (and PostgreSQL's URL test), and no connection.
    let files = sources();
    let g = graph(&files);
    let mut named: BTreeSet<&str> = BTreeSet::new();
    for (m, to) in g.iter().filter(|(m, _)| is_facade(m)) {
        let text = code(&files[m.as_str()]);
        for word in [
            "rusqlite",
            "Connection",
            "tokio_postgres",
            "is_remote()",
            "self.remote()",
        ] {
            let calls = text.matches(word).count();
            // `is_remote` itself is the one public answer, read from the engine.
            let allowed = usize::from(m == "store" && word == "is_remote()");
            assert!(calls <= allowed, "{m} names {word}");
        }
        named.extend(
            to.iter()
                .map(String::as_str)
                .filter(|t| is_engine_folder(t)),
        );
    }
    assert_eq!(
        named.into_iter().collect::<Vec<_>>(),
        ["postgres", "postgres::conn", "sqlite::engine"]
    );
    // The interface names neither engine; each engine's folder implements it.
    let deps = |m: &str| g.get(m).cloned().unwrap_or_default();
    assert!(!deps("engine").iter().any(|t| is_engine_folder(t)));
    for engine in ["sqlite::engine", "postgres::engine"] {
        assert!(deps(engine).contains("engine"), "{engine}");
    }
    // Nothing below the façade reaches an engine's implementation or the façade.
    for (m, to) in &g {
        if is_facade(m) || m.is_empty() || m == "writer" {
            continue;
        }
        assert!(!to.iter().any(|t| is_facade(t)), "{m} uses the façade");
        if !is_engine_folder(m) {
            assert!(!to.contains("sqlite::engine"), "{m} uses the SQLite engine");
        }
    }
}

#[test]
fn a_cycle_and_a_root_re_export_are_found() {
    let files: BTreeMap<String, String> = [
        ("", "pub use store::Store;\n"),
        ("store", "use crate::sync::SyncState;\n"),
        (
            "sync",
            "use crate::{error::Error, queue};\n#[cfg(test)]\nmod tests {\n    use crate::store;\n}\n",
        ),
        ("queue", "// crate::store is only named in a comment\nfn f() -> crate::Store {}\n"),
        ("error", "pub(crate) fn f() {}\n"),
        ("upstream", "mod links;\n"),
        (
            "upstream::links",
            "use crate::error::Error;\nmod inner {\n    use super::X;\n}\n",
        ),
    ]
    .into_iter()
    .map(|(m, t)| (m.to_owned(), t.to_owned()))
    .collect();
    let g = graph(&files);
    let edges: Vec<(String, String)> = g
        .iter()
        .flat_map(|(m, to)| to.iter().map(move |t| (m.clone(), t.clone())))
        .collect();
    let want = [
        ("queue", ""),
        ("store", "sync"),
        ("sync", "error"),
        ("sync", "queue"),
        ("upstream::links", "error"),
    ];
    assert_eq!(
        edges,
        want.map(|(a, b)| (a.to_owned(), b.to_owned())).to_vec()
    );
    // queue -> root is no cycle in the graph (the root's re-export is a local name): the
    // acyclic test refuses it on its own. A module that uses back one that uses it is.
    assert_eq!(cycle(&g), None);
    let mut g = g;
    g.entry("sync".into()).or_default().insert("store".into());
    assert_eq!(
        cycle(&g),
        Some(vec![
            "store".to_owned(),
            "sync".to_owned(),
            "store".to_owned()
        ])
    );
}

#[test]
fn the_binding_module_graph_is_acyclic() {
    let files = sources_of(&repo().join("src"));
    assert!(files.contains_key("session_state") && files.contains_key("async_api"));
    let g = graph(&files);
    assert_eq!(cycle(&g), None);
    // The store's native object holds the writer; the Promise API uses both, never the reverse.
    let deps = |m: &str| -> Vec<&str> {
        g.get(m)
            .map(|s| s.iter().map(String::as_str).collect())
            .unwrap_or_default()
    };
    assert!(!deps("session_state").contains(&"async_api"));
    assert!(deps("async_api").contains(&"session_state"));
}

#[test]
fn the_typescript_import_graph_is_acyclic() {
    let mut files = BTreeMap::new();
    let lib = repo().join("lib");
    collect_ts(&lib, &lib, &mut files);
    assert!(files.contains_key("session-state") && files.contains_key("openclaw/host"));
    let g = ts_graph(&files);
    assert!(g["session-state"].contains("async"));
    assert!(g["openclaw/host"].contains("session-state"));
    assert_eq!(cycle(&g), None);
}

#[test]
fn a_typescript_import_cycle_is_found() {
    let files: BTreeMap<String, String> = [
        ("a", "import { b } from './b'\nimport x from 'node:fs'\n"),
        (
            "b",
            "import type { C } from './sub/c'\n// import { a } from './a'\n",
        ),
        (
            "sub/c",
            "export { a } from '../a.js'\nimport { y } from '../../index.js'\n",
        ),
        ("d", "const m = await import('./a')\n"),
    ]
    .into_iter()
    .map(|(m, t)| (m.to_owned(), t.to_owned()))
    .collect();
    let g = ts_graph(&files);
    let edges: Vec<(String, String)> = g
        .iter()
        .flat_map(|(m, to)| to.iter().map(move |t| (m.clone(), t.clone())))
        .collect();
    let want = [("a", "b"), ("b", "sub/c"), ("d", "a"), ("sub/c", "a")];
    assert_eq!(
        edges,
        want.map(|(a, b)| (a.to_owned(), b.to_owned())).to_vec()
    );
    assert_eq!(
        cycle(&g),
        Some(["a", "b", "sub/c", "a"].map(str::to_owned).to_vec())
    );
}

/// The modules outside `sqlite/` whose code (comments aside) names `rusqlite`.
fn naming_rusqlite(files: &BTreeMap<String, String>) -> Vec<&str> {
    files
        .iter()
        .filter(|(m, _)| m.as_str() != "sqlite" && !m.starts_with("sqlite::"))
        .filter(|(_, text)| {
            text.lines()
                .any(|l| !l.trim_start().starts_with("//") && l.contains("rusqlite"))
        })
        .map(|(m, _)| m.as_str())
        .collect()
}

#[test]
fn only_the_sqlite_folder_names_rusqlite() {
    // SQLite's parts are under `sqlite/` (docs/architecture.md, "The storage seam"): a module
    // outside it that starts naming rusqlite fails here.
    assert_eq!(naming_rusqlite(&sources()), Vec::<&str>::new());
}

#[test]
fn the_shared_write_flows_name_no_engine() {
    // docs/architecture.md: `record` and `group` are the write flows both engines run over
    // `Rows`; what is one engine's (SQLite's `Recorder`) lives in its folder.
    let g = graph(&sources());
    for shared in ["record", "group", "delivery", "rows", "cursors"] {
        let to = g.get(shared).cloned().unwrap_or_default();
        assert!(!to.is_empty(), "{shared} is read");
        let engines: Vec<&String> = to.iter().filter(|t| is_engine_folder(t)).collect();
        assert!(engines.is_empty(), "{shared} names {engines:?}");
    }
    let recorder = g.get("sqlite::recorder").cloned().unwrap_or_default();
    assert!(recorder.contains("record") && recorder.contains("group"));
}
