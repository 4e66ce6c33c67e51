//! The shell commands README.md prints: every ```sh block, each command joined across its
//! `\` continuations, with the `## ` section it is in and what the comments before it (in
//! the same block) promise it prints: words starting `DECISION_`, `STATE_` or `SERVING`.
//! The quickstart test emulates the grpcurl calls of one section; the polyglot README test
//! runs every grpcurl command with the real grpcurl.

/// Words in a comment that promise what the next command prints.
pub const PROMISES: [&str; 3] = ["DECISION_", "STATE_", "SERVING"];

/// One command of a ```sh block.
#[derive(Debug, Clone)]
pub struct Command {
    /// The `## ` heading above it, without the `## `.
    pub section: String,
    /// Its first line in README.md (1-based).
    pub line: usize,
    /// The command, continuations joined, trimmed.
    pub text: String,
    /// What the comments before it promise it prints.
    pub promises: Vec<String>,
}

/// Every command of every ```sh block of README.md, in order.
pub fn commands() -> Vec<Command> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).expect("README.md is readable");
    let lines: Vec<&str> = readme.lines().collect();
    let (mut section, mut in_sh, mut promises) = (String::new(), false, Vec::new());
    let (mut out, mut i) = (Vec::new(), 0);
    while i < lines.len() {
        let (first, mut text) = (i, String::new());
        if let Some(heading) = lines[i].strip_prefix("## ") {
            section = heading.trim().to_owned();
        } else if lines[i].starts_with("```") {
            in_sh = lines[i].trim_end() == "```sh" && !in_sh;
            promises.clear();
        } else if in_sh {
            while let Some(continued) = lines[i].strip_suffix('\\') {
                (text, i) = (text + continued, i + 1);
            }
            text.push_str(lines[i]);
        }
        i += 1;
        let text = text.trim();
        if let Some(comment) = text.strip_prefix('#') {
            let words = comment.split(|c: char| !c.is_ascii_alphanumeric() && c != '_');
            let promised = words.filter(|w| PROMISES.iter().any(|p| w.starts_with(p)));
            promises.extend(promised.map(String::from));
        } else if !text.is_empty() {
            out.push(Command {
                section: section.clone(),
                line: first + 1,
                text: text.to_owned(),
                promises: std::mem::take(&mut promises),
            });
        }
    }
    out
}

/// The commands of the section headed `## {name}`; fails if it has none.
pub fn section(name: &str) -> Vec<Command> {
    let cmds: Vec<Command> = commands()
        .into_iter()
        .filter(|c| c.section == name)
        .collect();
    assert!(
        !cmds.is_empty(),
        "README.md section `{name}` has no ```sh command"
    );
    cmds
}
