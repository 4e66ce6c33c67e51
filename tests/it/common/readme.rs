//! The shell commands the docs print: every ```sh block of README.md and
//! docs/OPERATIONS.md, each command joined across its `\` continuations, with its file and
//! line, the `## ` section it is in and what the comments before it (in the same block)
//! promise it prints: words starting `DECISION_`, `STATE_` or `SERVING`.
//! The quickstart test emulates the grpcurl calls of one section; the polyglot README test
//! runs every grpcurl command with the real grpcurl.

/// The files whose commands are read, relative to the repository root, in this order.
pub const FILES: [&str; 2] = ["README.md", "docs/OPERATIONS.md"];

/// Words in a comment that promise what the next command prints.
pub const PROMISES: [&str; 3] = ["DECISION_", "STATE_", "SERVING"];

/// One command of a ```sh block.
#[derive(Debug, Clone)]
pub struct Command {
    /// The file it is in, one of [`FILES`].
    pub file: &'static str,
    /// The `## ` heading above it, without the `## `.
    pub section: String,
    /// Its first line in its file (1-based).
    pub line: usize,
    /// The command, continuations joined, trimmed.
    pub text: String,
    /// What the comments before it promise it prints.
    pub promises: Vec<String>,
}

impl Command {
    /// Where it is, for messages: `docs/OPERATIONS.md line 12`.
    pub fn at(&self) -> String {
        format!("{} line {}", self.file, self.line)
    }
}

/// Every command of every ```sh block of [`FILES`], in order.
pub fn commands() -> Vec<Command> {
    FILES.into_iter().flat_map(commands_in).collect()
}

/// Every command of every ```sh block of `file`, in order.
fn commands_in(file: &'static str) -> Vec<Command> {
    let path = format!("{}/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let lines: Vec<&str> = text.lines().collect();
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
                file,
                section: section.clone(),
                line: first + 1,
                text: text.to_owned(),
                promises: std::mem::take(&mut promises),
            });
        }
    }
    out
}

/// The commands of the section headed `## {name}`, in whichever of [`FILES`] it is; fails
/// if it has none, or if both files have commands under that heading.
pub fn section(name: &str) -> Vec<Command> {
    let cmds: Vec<Command> = commands()
        .into_iter()
        .filter(|c| c.section == name)
        .collect();
    let files = FILES.join(" or ");
    assert!(
        !cmds.is_empty(),
        "no ```sh command under `## {name}` in {files}"
    );
    assert!(
        cmds.iter().all(|c| c.file == cmds[0].file),
        "`## {name}` has commands in more than one of {files}: rename one section"
    );
    cmds
}
