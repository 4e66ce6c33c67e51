//! No module cycle in the server crate (issue 29 §3): the top-level modules of `src/`, with
//! an edge from each to every other it names as `crate::…` (comments aside), form no cycle,
//! so each module can be read on top of the ones below it. A default lives in the module
//! that owns the thing, and `config` reads it from there.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The `.rs` files under `dir`, at any depth.
fn sources(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir)
        .expect("a source directory")
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// Every top-level module of `src` and the files that make it up.
fn modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(src).expect("src/").flatten() {
        let path = entry.path();
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        if ["lib", "main"].contains(&stem) || stem.is_empty() {
            continue;
        }
        let files: &mut Vec<PathBuf> = modules.entry(stem.to_owned()).or_default();
        if path.is_dir() {
            sources(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    modules.retain(|_, files| !files.is_empty());
    modules
}

/// The modules `text` names as `crate::name` or inside `crate::{…}`.
fn named(text: &str, known: &BTreeMap<String, Vec<PathBuf>>) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut names = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let words: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => group.split('}').next().unwrap_or("").split(',').collect(),
            None => vec![rest],
        };
        for word in words {
            let name: String = word
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if known.contains_key(&name) {
                names.insert(name);
            }
        }
    }
    names
}

/// A cycle through `from`, if the graph has one reachable from it.
fn cycle(
    from: &str,
    graph: &BTreeMap<String, BTreeSet<String>>,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(at) = path.iter().position(|m| m == from) {
        let mut found = path[at..].to_vec();
        found.push(from.to_owned());
        return Some(found);
    }
    if done.contains(from) {
        return None;
    }
    path.push(from.to_owned());
    for next in &graph[from] {
        if let Some(found) = cycle(next, graph, path, done) {
            return Some(found);
        }
    }
    path.pop();
    done.insert(from.to_owned());
    None
}

#[test]
fn the_servers_top_level_modules_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&src);
    assert!(modules.contains_key("store") && modules.contains_key("config"));
    let graph: BTreeMap<String, BTreeSet<String>> = modules
        .iter()
        .map(|(name, files)| {
            let mut edges = BTreeSet::new();
            for file in files {
                let text = std::fs::read_to_string(file).expect("a source file");
                edges.extend(named(&text, &modules));
            }
            edges.remove(name);
            (name.clone(), edges)
        })
        .collect();
    assert!(graph["config"].contains("store"), "the walk sees edges");
    let mut done = BTreeSet::new();
    for name in graph.keys() {
        let found = cycle(name, &graph, &mut Vec::new(), &mut done);
        assert!(
            found.is_none(),
            "a module cycle: {}",
            found.unwrap_or_default().join(" → ")
        );
    }
}
