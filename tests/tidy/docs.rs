//! The documentation holds together: every inline link, image and reference definition in the
//! repository's Markdown files names a file or directory that exists, and a `#fragment` names a
//! heading (GitHub's anchor for it) or an HTML anchor of the page it points at; README.md stays a
//! front door of at most 250 lines, the rest living under docs/.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const README_MAX_LINES: usize = 250;

/// Links with these prefixes leave the repository and are not followed.
const EXTERNAL: [&str; 3] = ["http://", "https://", "mailto:"];

/// The repository: the parent of the relay-tests package.
pub(crate) const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// What one Markdown file links to, by line number, and the anchors it defines.
struct Page {
    links: Vec<(usize, String)>,
    anchors: HashSet<String>,
}

/// The repository's Markdown files, relative to `root`: those git tracks or would track
/// (untracked but not ignored), or, without git, those a walk finds outside build output.
pub(crate) fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let args = "ls-files -z --cached --others --exclude-standard -- *.md".split(' ');
    let mut files: Vec<PathBuf> = match Command::new("git").args(args).current_dir(root).output() {
        Ok(out) if out.status.success() => {
            let listed = String::from_utf8_lossy(&out.stdout);
            listed.split_terminator('\0').map(PathBuf::from).collect()
        }
        _ => walk(root, Path::new("")),
    };
    files.retain(|file| root.join(file).is_file());
    files
}

fn walk(root: &Path, dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(root.join(dir)).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = dir.join(&name);
        let skipped = [".git", "target", ".terraform"].contains(&name.as_str());
        if skipped || name.starts_with(".venv") || path == Path::new("fuzz/corpus") {
            continue;
        }
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            found.extend(walk(root, &path));
        } else if name.ends_with(".md") {
            found.push(path);
        }
    }
    found
}

/// Reads links and anchors off the text, outside fenced code blocks and inline code spans.
fn read_page(text: &str) -> Page {
    let (mut links, mut anchors) = (Vec::new(), HashSet::new());
    let mut fence: Option<(char, usize)> = None;
    let mut headings: HashMap<String, usize> = HashMap::new();
    for (index, raw) in text.lines().enumerate() {
        let trimmed = raw.trim_start();
        let mark = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = mark.map_or(0, |mark| trimmed.chars().take_while(|c| *c == mark).count());
        if run >= 3 {
            let bare = trimmed[run..].trim().is_empty();
            fence = match fence {
                Some((open, len)) if mark == Some(open) && run >= len && bare => None,
                Some(open) => Some(open),
                None => mark.map(|mark| (mark, run)),
            };
            continue;
        }
        if fence.is_some() {
            continue;
        }
        if let Some(slug) = heading_slug(raw) {
            let n = headings.entry(slug.clone()).or_insert(0);
            anchors.insert(if *n > 0 { format!("{slug}-{n}") } else { slug });
            *n += 1;
        }
        let line = without_code_spans(raw);
        for attribute in ["name=\"", "id=\""] {
            for value in line.split(attribute).skip(1) {
                let value = value.split('"').next().unwrap_or_default();
                anchors.insert(value.to_owned());
            }
        }
        for dest in destinations(&line) {
            links.push((index + 1, dest));
        }
    }
    Page { links, anchors }
}

/// GitHub's anchor for an ATX heading: lowercase, spaces to '-', punctuation other than '-' and
/// '_' dropped.
fn heading_slug(line: &str) -> Option<String> {
    let text = line.trim_start_matches(' ');
    let hashes = text.chars().take_while(|c| *c == '#').count();
    let (indent, text) = (line.len() - text.len(), &text[hashes..]);
    let spaced = text.is_empty() || text.starts_with([' ', '\t']);
    if indent > 3 || !(1..=6).contains(&hashes) || !spaced {
        return None;
    }
    let text = text.trim().trim_end_matches('#').trim_end().to_lowercase();
    let kept = |c: &char| c.is_alphanumeric() || *c == '-' || *c == '_';
    Some(text.replace(' ', "-").chars().filter(kept).collect())
}

/// The line with every inline code span (backticks up to the next run of as many) blanked out.
fn without_code_spans(line: &str) -> String {
    let (mut out, mut rest) = (String::new(), line);
    while let Some(start) = rest.find('`') {
        let ticks = rest[start..].len() - rest[start..].trim_start_matches('`').len();
        let (run, after) = rest[start..].split_at(ticks);
        let end = after.find(run);
        out.push_str(&rest[..start]);
        out.push_str(if end.is_some() { " " } else { run });
        rest = end.map_or(after, |end| &after[end + ticks..]);
    }
    out + rest
}

/// The destination of a reference definition `[label]: dest` (indented at most three spaces; a
/// footnote is none) and of every `[text](dest)` and `![alt](dest)` on the line.
fn destinations(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let trimmed = line.trim_start_matches(' ');
    let definition = trimmed.strip_prefix('[').and_then(|r| r.split_once("]:"));
    if let Some((label, after)) = definition.filter(|_| line.len() - trimmed.len() <= 3) {
        let dest = after.split_whitespace().next().unwrap_or_default();
        if !label.contains(']') && !label.starts_with('^') && !dest.is_empty() {
            found.push(dest.trim_matches(['<', '>']).to_owned());
        }
    }
    for (at, _) in line.match_indices("](") {
        let text = line[at + 2..].trim_start();
        let dest = if let Some(angled) = text.strip_prefix('<') {
            angled.split('>').next().unwrap_or_default()
        } else {
            let mut depth = 0_i32;
            let end = text.find(|c: char| {
                depth += i32::from(c == '(') - i32::from(c == ')');
                depth < 0 || c.is_whitespace()
            });
            &text[..end.unwrap_or(text.len())]
        };
        if !dest.is_empty() {
            found.push(dest.to_owned());
        }
    }
    found
}

/// Drops the backslash of every backslash escape (`\_` is `_` in a destination).
fn unescape(dest: &str) -> String {
    let escape = |i: usize| dest[i + 1..].starts_with(|c: char| c.is_ascii_punctuation());
    dest.char_indices()
        .filter(|&(i, c)| c != '\\' || !escape(i))
        .map(|(_, c)| c)
        .collect()
}

fn page_at(path: &Path) -> Page {
    read_page(&fs::read_to_string(path).unwrap_or_default())
}

#[test]
fn every_markdown_link_resolves() {
    let root = Path::new(ROOT);
    let files = markdown_files(root);
    assert!(files.contains(&PathBuf::from("README.md")), "no README.md");
    let mut broken = Vec::new();
    for file in &files {
        for (line, written) in page_at(&root.join(file)).links {
            let dest = unescape(&written);
            if EXTERNAL.iter().any(|prefix| dest.starts_with(prefix)) {
                continue;
            }
            let (path, fragment) = dest.split_once('#').unwrap_or((&dest, ""));
            let path = path.split('?').next().unwrap_or_default();
            let target = match path.strip_prefix('/') {
                _ if path.is_empty() => root.join(file),
                Some(from_root) => root.join(from_root),
                None => root.join(file).parent().unwrap_or(root).join(path),
            };
            let place = format!("{}:{line}: ({written})", file.display());
            if !target.exists() {
                broken.push(format!("{place}: no such file or directory"));
            } else if !fragment.is_empty()
                && target.extension().is_some_and(|ext| ext == "md")
                && !page_at(&target).anchors.contains(fragment)
            {
                broken.push(format!("{place}: no heading or anchor #{fragment} there"));
            }
        }
    }
    let report = broken.join("\n");
    assert!(broken.is_empty(), "broken links:\n{report}");
}

#[test]
fn the_readme_is_a_front_door() {
    let text = fs::read_to_string(Path::new(ROOT).join("README.md")).expect("README.md");
    let lines = text.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move a section into docs/"
    );
}

#[test]
fn links_and_anchors_are_read_as_github_renders_them() {
    let page = read_page(concat!(
        "# The `relay` command\n## Notes\n## Notes\n<a name=\"input_x\"></a>\n[a](x.md#y) ",
        "`[b](code.md)` ``[c](d) ` `` ![e](<e.md> \"t\") [f](#input\\_x) [g](g_(1).md)\n",
        "````md\n```\n[h](fenced.md)\n````\n[i]: ref.md\n",
    ));
    let mut anchors: Vec<&str> = page.anchors.iter().map(String::as_str).collect();
    anchors.sort_unstable();
    assert_eq!(
        anchors,
        ["input_x", "notes", "notes-1", "the-relay-command"]
    );
    let dests: Vec<String> = page.links.iter().map(|(_, dest)| unescape(dest)).collect();
    assert_eq!(dests.join(" "), "x.md#y e.md #input_x g_(1).md ref.md");
}
