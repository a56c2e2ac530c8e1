#!/usr/bin/env python3
"""Builds the compact provider schemas under tests/terraform/schemas/ (see tf-schemas.sh).

    tf_schemas.py types TF_DIR PREFIX
        The resource, data and ephemeral types under TF_DIR whose name starts with PREFIX.
    tf_schemas.py aws --schema FILE --tf-dir DIR --extra KIND:TYPE... --source TEXT --out FILE
        Reduces the output of `terraform providers schema -json` to the aws_* types used.
    tf_schemas.py google --repo GIT_DIR [--tag TAG] --tf-dir DIR --extra KIND:TYPE... --out FILE
        Derives the schema of the google_* types used from the provider's documentation
        (website/docs) at a tag of its git repository.

Every output is a JSON object with sorted keys and sorted lists, so the same inputs give the
same bytes. A block is {"arguments": [...], "computed": [...], "blocks": {name: block}}.
"""

import argparse
import json
import os
import re
import subprocess
import sys

KINDS = ("resource", "data", "ephemeral")

# ---------------------------------------------------------------------------------------------
# Types used under terraform/
# ---------------------------------------------------------------------------------------------

TYPE_DECL = re.compile(r'^\s*(resource|data|ephemeral)\s+"([A-Za-z0-9_]+)"', re.MULTILINE)


def used_types(tf_dir, prefix):
    """{kind: set(type)} of the types declared in the .tf files under tf_dir."""
    found = {kind: set() for kind in KINDS}
    for root, dirs, files in os.walk(tf_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.endswith(".tf"):
                continue
            with open(os.path.join(root, name), encoding="utf-8") as f:
                text = f.read()
            for kind, type_name in TYPE_DECL.findall(text):
                if type_name.startswith(prefix):
                    found[kind].add(type_name)
    return found


def wanted_types(tf_dir, prefix, extra):
    found = used_types(tf_dir, prefix)
    for item in extra:
        kind, _, type_name = item.partition(":")
        if kind not in KINDS or not type_name:
            sys.exit(f"tf_schemas: --extra wants KIND:TYPE with KIND in {KINDS}, got {item!r}")
        found[kind].add(type_name)
    return found


def new_block():
    return {"arguments": set(), "computed": set(), "blocks": {}}


def finish(block):
    """Sorted lists; a name that is an argument or a block is not also listed as computed."""
    settable = block["arguments"] | set(block["blocks"])
    return {
        "arguments": sorted(block["arguments"]),
        "computed": sorted(block["computed"] - settable),
        "blocks": {name: finish(b) for name, b in sorted(block["blocks"].items())},
    }


def merge(into, other):
    into["arguments"] |= other["arguments"]
    into["computed"] |= other["computed"]
    for name, b in other["blocks"].items():
        if name in into["blocks"]:
            merge(into["blocks"][name], b)
        else:
            into["blocks"][name] = b


def write_json(path, data):
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# ---------------------------------------------------------------------------------------------
# AWS: from `terraform providers schema -json`
# ---------------------------------------------------------------------------------------------


def purely_computed(attr):
    return bool(attr.get("computed")) and not attr.get("optional") and not attr.get("required")


def reduce_tf_block(schema_block):
    """A block of the provider schema (attributes and block_types) as a compact block.

    Nested attributes (nested_type, protocol 6) are settable like blocks and are listed as
    blocks; a purely computed one is only a name under "computed"."""
    block = new_block()
    for name, attr in schema_block.get("attributes", {}).items():
        if purely_computed(attr):
            block["computed"].add(name)
        elif "nested_type" in attr:
            block["blocks"][name] = reduce_tf_block(attr["nested_type"])
        else:
            block["arguments"].add(name)
    for name, block_type in schema_block.get("block_types", {}).items():
        block["blocks"][name] = reduce_tf_block(block_type.get("block", {}))
    return block


def cmd_aws(args):
    with open(args.schema, encoding="utf-8") as f:
        schema = json.load(f)
    provider = args.provider
    if provider not in schema.get("provider_schemas", {}):
        sys.exit(f"tf_schemas: {provider} is not in {args.schema}")
    ps = schema["provider_schemas"][provider]
    sections = {
        "resource": ps.get("resource_schemas", {}),
        "data": ps.get("data_source_schemas", {}),
        "ephemeral": ps.get("ephemeral_resource_schemas", {}),
    }
    wanted = wanted_types(args.tf_dir, "aws_", args.extra)
    out = {"provider": provider, "version": args.version, "source": args.source}
    missing = []
    for kind in KINDS:
        out[kind] = {}
        for type_name in sorted(wanted[kind]):
            if type_name not in sections[kind]:
                missing.append(f"{kind} {type_name}")
                continue
            out[kind][type_name] = finish(reduce_tf_block(sections[kind][type_name]["block"]))
    if missing:
        sys.exit(f"tf_schemas: not in the {args.version} schema: {', '.join(missing)}")
    write_json(args.out, out)


# ---------------------------------------------------------------------------------------------
# Google: from the provider's documentation
# ---------------------------------------------------------------------------------------------
#
# The pages (website/docs/r/*.html.markdown, d/ for data sources) list the top-level arguments as
# bullets "* `name` - (Required|Optional) ..." under "## Argument Reference", and the computed
# attributes under "## Attributes Reference". A nested block has its own section,
#   <a name="nested_x"></a>The `x` block supports:
# linked from the argument that holds it: "Structure is [documented below](#nested_x)". Some
# handwritten pages write the section without an anchor ("The `condition` block supports:") and
# the link without a target ("Structure is documented below."); those are matched by name.

ITEM = re.compile(r"^\*\s+`([A-Za-z0-9_./]+)`\s*(.*)$")
H2 = re.compile(r"^##\s+(.*?)\s*$")
ANCHOR = re.compile(r'^<a\s+name="([^"]+)"\s*>\s*</a>\s*(.*)$')
SECTION_TITLE = re.compile(
    r"^(?:The\s+`([A-Za-z0-9_]+)`(?:\s+block)?(?:\s+(?:supports|contains)\b|\s*$)"
    r"|`([A-Za-z0-9_]+)`\s+(?:block\s+)?supports\s+the\s+following)"
)
# The rest of a title whose anchor line ends early:
#   <a name="nested_x"></a>The
#   `x` block supports:
TITLE_REST = re.compile(r"^`([A-Za-z0-9_]+)`\s+(?:block\s+)?(?:supports|contains)\b")
TIMEOUT_ITEM = re.compile(r"^[-*]\s+`([a-z_]+)`")
LINK = re.compile(r"\]\(#([A-Za-z0-9_\-]+)\)")
ONLY_BY = re.compile(r"only\s+(?:by|for)\s+`?(google_[a-z0-9_]+)`?")
EXCEPT_FOR = re.compile(r"except\s+(?:by|for)\s+`?(google_[a-z0-9_]+)`?")
SEE_RESOURCE = re.compile(r"docs/resources/(google_[a-z0-9_]+)\)")
IAM_TYPE = re.compile(r"^(.*_iam)_(member|binding|policy|audit_config)$")


class Section:
    def __init__(self, anchor, context):
        self.anchor = anchor  # None for a section without an anchor
        self.name = None  # the block name of its title, "The `x` block ..."
        self.context = context  # "args" or "attrs": the part of the page it is in
        self.items = []  # [name, text]


def parse_page(text):
    """The page as {"args": [items], "attrs": [items], "timeouts": [names], "sections": [...]}."""
    page = {"args": [], "attrs": [], "timeouts": [], "sections": [], "attrs_text": []}
    region = None  # "args", "attrs", "timeouts" or None (elsewhere)
    items = None  # the item list that bullets go to
    current = None  # the item whose description is being read
    in_code = False
    pending_title = None  # a section whose title is on the line after its anchor
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.lstrip().startswith("```"):
            in_code = not in_code
            current = None
            continue
        if in_code:
            continue
        m = H2.match(line)
        if m:
            heading = m.group(1).lower()
            if heading.startswith(("argument reference", "arguments reference")):
                region = "args"
            elif heading.startswith(("attributes reference", "attribute reference")):
                region = "attrs"
            elif heading.startswith("timeouts"):
                region = "timeouts"
            else:
                region = None
            items = page[region] if region in ("args", "attrs") else None
            current = pending_title = None
            continue
        if region is None:
            continue
        if region == "attrs":
            page["attrs_text"].append(line)
        if region == "timeouts":
            m = TIMEOUT_ITEM.match(line)
            if m:
                page["timeouts"].append(m.group(1))
            continue
        m = ANCHOR.match(line)
        if m:
            section = Section(m.group(1), region)
            t = SECTION_TITLE.match(m.group(2))
            if t:
                section.name = t.group(1) or t.group(2)
            else:
                pending_title = section
            page["sections"].append(section)
            items = section.items
            current = None
            continue
        m = SECTION_TITLE.match(line) or (pending_title is not None and TITLE_REST.match(line))
        if m:
            if pending_title is not None:
                pending_title.name = m.group(1) or m.group(2)
                pending_title = None
            else:
                section = Section(None, region)
                section.name = m.group(1) or m.group(2)
                page["sections"].append(section)
                items = section.items
            current = None
            continue
        if line.strip():
            pending_title = None
        m = ITEM.match(line)
        if m and items is not None:
            current = [m.group(1), m.group(2)]
            items.append(current)
            continue
        if current is not None:
            current[1] += "\n" + line
    return page


def qualifier(text):
    """("Optional, Computed", rest of the text) from "- (Optional, Computed) ..."."""
    s = text.lstrip()
    if s[:1] in ("-", ":", "\u2013"):
        s = s[1:].lstrip()
    if not s.startswith("("):
        return "", s
    depth = 0
    for i, c in enumerate(s):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return s[1:i], s[i + 1 :].lstrip()
    return s[1:], ""


class PageTree:
    """Builds the block tree of one page, for one type, by following the links."""

    def __init__(self, page, type_name, where):
        self.page = page
        self.type_name = type_name
        self.where = where
        self.by_anchor = {}
        for s in page["sections"]:
            if s.anchor is not None:
                self.by_anchor.setdefault(s.anchor, s)
        self.visited = set()
        self.warnings = []
        self.beta = []

    def section_for(self, name, text, parent):
        """The section an item's description points to, or None. parent: the section the item
        is in (None at the top level)."""
        broken = False
        for anchor in LINK.findall(text):
            if anchor in self.by_anchor:
                return self.by_anchor[anchor]
            if anchor.startswith("nested_"):
                broken = True
        said = broken or "documented below" in text.lower()
        # Without a working link, the section of that block name: under the parent's anchor
        # first, then the only one, then the first one not taken yet that follows the parent.
        # An item that does not say "documented below" only takes a section without an anchor
        # (pages that link nothing).
        sections = self.page["sections"]
        candidates = [s for s in sections if s.name == name and (said or s.anchor is None)]
        parent_anchor = parent.anchor if parent is not None else None
        for anchor in (f"{parent_anchor}_{name}" if parent_anchor else None, f"nested_{name}"):
            for s in candidates:
                if s.anchor == anchor:
                    return s
        if len(candidates) == 1:
            return candidates[0]
        start = sections.index(parent) if parent is not None else -1
        for i, s in enumerate(sections):
            if s in candidates and i > start and id(s) not in self.visited:
                return s
        if said:
            self.warnings.append(
                f"{self.where}: no section for `{name}`, which is documented below"
                + (" (its link is broken)" if broken else "")
            )
        return None

    def skip(self, section):
        """Marks a section, and those it links to, as accounted for without building them."""
        if section is None or id(section) in self.visited:
            return
        self.visited.add(id(section))
        for name, text in section.items:
            self.skip(self.section_for(name, text, section))

    def keep(self, name, qual):
        """The names an item stands for on this type (IAM pages document several types)."""
        m = ONLY_BY.search(qual)
        if m and m.group(1) != self.type_name:
            return []
        m = EXCEPT_FOR.search(qual)
        if m and m.group(1) == self.type_name:
            return []
        names = name.split("/")
        if len(names) > 1:
            iam = IAM_TYPE.match(self.type_name)
            if iam and set(names) == {"member", "members"}:
                wanted = {"member": "member", "binding": "members"}.get(iam.group(2))
                return [wanted] if wanted else []
        return names

    def build(self, items, computed_context, path, parent):
        block = new_block()
        for name, text in items:
            qual, rest = qualifier(text)
            words = {w.strip().lower() for w in re.split(r"[,;]", qual)}
            if "beta" in qual.lower() or rest.startswith("[Beta]"):
                self.beta.append(".".join(path + [name]))
                self.skip(self.section_for(name, text, parent))
                continue
            computed = (
                computed_context
                or "output" in words
                or ("computed" in words and not ({"optional", "required"} & words))
                or qual.lower().startswith("computed")
            )
            section = self.section_for(name, text, parent)
            kept = self.keep(name, qual)
            if not kept:
                self.skip(section)
            for n in kept:
                if computed:
                    block["computed"].add(n)
                    self.skip(section)
                    continue
                if section is None:
                    block["arguments"].add(n)
                    continue
                if id(section) in self.active:
                    self.warnings.append(f"{self.where}: section cycle at {'.'.join(path + [n])}")
                    continue
                self.visited.add(id(section))
                self.active.add(id(section))
                child = self.build(section.items, False, path + [n], section)
                self.active.discard(id(section))
                if n in block["blocks"]:
                    merge(block["blocks"][n], child)
                else:
                    block["blocks"][n] = child
        return block

    def tree(self, kind):
        self.active = set()
        block = self.build(self.page["args"], False, [], None)
        attrs = self.build(self.page["attrs"], True, [], None)
        block["computed"] |= attrs["computed"]
        if kind == "resource" and self.page["timeouts"]:
            block["blocks"]["timeouts"] = {
                "arguments": set(self.page["timeouts"]),
                "computed": set(),
                "blocks": {},
            }
        for s in self.page["sections"]:
            if s.context == "args" and id(s) not in self.visited:
                self.warnings.append(
                    f"{self.where}: section {s.anchor or s.name!r} is linked from no argument"
                )
        return block


class Docs:
    def __init__(self, repo, tag):
        self.repo = repo
        self.tag = tag
        self.cache = {}

    def read(self, path):
        if path not in self.cache:
            r = subprocess.run(
                ["git", "-C", self.repo, "show", f"{self.tag}:{path}"],
                capture_output=True,
                text=True,
            )
            self.cache[path] = r.stdout if r.returncode == 0 else None
        return self.cache[path]

    def page_of(self, kind, type_name):
        """(path, text) of the page that documents the type."""
        folder = {"resource": "r", "data": "d", "ephemeral": "ephemeral-resources"}[kind]
        short = type_name[len("google_") :]
        names = [short, type_name]
        iam = IAM_TYPE.match(short)
        if iam:
            names += [iam.group(1), "google_" + iam.group(1)]
        for name in names:
            path = f"website/docs/{folder}/{name}.html.markdown"
            text = self.read(path)
            if text is not None:
                return path, text
        sys.exit(
            f"tf_schemas: no page for {kind} {type_name} under website/docs/{folder}/ at {self.tag}"
        )


def google_type(docs, kind, type_name, warnings, beta):
    path, text = docs.page_of(kind, type_name)
    page = parse_page(text)
    where = f"{kind} {type_name} ({os.path.basename(path)})"
    tree = PageTree(page, type_name, where)
    block = tree.tree(kind)
    if kind != "resource":
        # A data source documented as "See google_x resource for details of the available
        # attributes" exports every field of that resource.
        for resource in sorted(set(SEE_RESOURCE.findall("\n".join(page["attrs_text"])))):
            base = google_type(docs, "resource", resource, [], [])
            base_names = base["arguments"] | base["computed"] | set(base["blocks"])
            block["computed"] |= base_names - {"timeouts"}
    warnings.extend(tree.warnings)
    beta.extend(f"{type_name}.{p}" for p in tree.beta)
    return block


def latest_tag(repo, major):
    out = subprocess.run(
        ["git", "-C", repo, "tag", "-l", f"v{major}.*"], capture_output=True, text=True, check=True
    ).stdout.split()
    releases = [t for t in out if re.fullmatch(rf"v{major}\.\d+\.\d+", t)]
    if not releases:
        sys.exit(f"tf_schemas: no v{major}.x.y tag in {repo}")
    return max(releases, key=lambda t: tuple(int(x) for x in t[1:].split(".")))


def cmd_google(args):
    tag = args.tag or latest_tag(args.repo, args.major)
    commit = subprocess.run(
        ["git", "-C", args.repo, "rev-parse", f"{tag}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    docs = Docs(args.repo, tag)
    wanted = wanted_types(args.tf_dir, "google_", args.extra)
    out = {
        "provider": "registry.terraform.io/hashicorp/google",
        "version": tag[1:],
        "source": (
            f"website/docs of hashicorp/terraform-provider-google at {tag} (commit {commit}): "
            "arguments and nested blocks of the Argument Reference, computed attributes of the "
            "Attributes Reference and of output-only fields; fields marked Beta (google-beta "
            "only) are left out and listed under beta_only"
        ),
        "project_argument": {},
        "beta_only": {},
    }
    warnings, beta = [], []
    for kind in KINDS:
        out[kind] = {}
        for type_name in sorted(wanted[kind]):
            block = finish(google_type(docs, kind, type_name, warnings, beta))
            out[kind][type_name] = block
            out["project_argument"][f"{kind}.{type_name}"] = "project" in block["arguments"]
    for path in sorted(set(beta)):
        type_name, _, field = path.partition(".")
        out["beta_only"].setdefault(type_name, []).append(field)
    for w in warnings:
        print(f"tf_schemas: warning: {w}", file=sys.stderr)
    write_json(args.out, out)


def cmd_types(args):
    found = used_types(args.tf_dir, args.prefix)
    for kind in KINDS:
        for type_name in sorted(found[kind]):
            print(f"{kind} {type_name}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("types")
    p.add_argument("tf_dir")
    p.add_argument("prefix")
    p.set_defaults(func=cmd_types)

    p = sub.add_parser("aws")
    p.add_argument("--schema", required=True)
    p.add_argument("--provider", default="registry.terraform.io/hashicorp/aws")
    p.add_argument("--version", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--tf-dir", required=True)
    p.add_argument("--extra", nargs="*", default=[])
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_aws)

    p = sub.add_parser("google")
    p.add_argument("--repo", required=True)
    p.add_argument("--tag")
    p.add_argument("--major", type=int, default=7)
    p.add_argument("--tf-dir", required=True)
    p.add_argument("--extra", nargs="*", default=[])
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_google)

    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
