"""The overlay that lets terraform/ run against the AWS provider cached on this machine.

Usage: python3 infra/local/tf_overlay.py DIR VERSION

Rewrites, in place, every .tf file under DIR (a copy of terraform/; never the tree itself):
  - every hashicorp/aws constraint becomes VERSION (aws-relay and the AWS examples require
    >= 6.29.0; aws-queue-grant's >= 5.0.0 admits 5.100.0 as it is, and is pinned all the same);
  - arguments newer than VERSION are dropped: aws_lambda_permission's invoked_via_function_url
    (6.29.0; tests/terraform/contract.rs, NEWER_AWS_ARGUMENTS, lists them);
  - 6.0 renamed data.aws_region's `name` to `region`: `.region` reads `.name` again;
  - hashicorp/random is not cached: the ephemeral random_password and its provider requirement
    are dropped, and its result is a fixed placeholder.
Each rule that matched nothing says so, so that a stale rule shows. infra/local/tf-check.sh
(validate, terraform test) and infra/local/moto-apply.sh (apply to moto) use it.
"""
import os
import re
import sys

root, version = sys.argv[1], sys.argv[2]
rules = [
    ("the hashicorp/aws constraint",
     re.compile(r'(aws\s*=\s*\{\s*source\s*=\s*"hashicorp/aws"\s*,\s*version\s*=\s*)"[^"]*"'),
     lambda m: f'{m.group(1)}"{version}"'),
    ("invoked_via_function_url (6.29.0)",
     re.compile(r'\n[ \t]*invoked_via_function_url\s*=[^\n]*'), ""),
    ("data.aws_region's region (6.0)",
     re.compile(r'\b(data\.aws_region\.[A-Za-z0-9_]+)\.region\b'), r"\1.name"),
    ("the hashicorp/random requirement",
     re.compile(r'\n[ \t]*random\s*=\s*\{[^}\n]*"hashicorp/random"[^}\n]*\}'), ""),
    ("the ephemeral random_password",
     re.compile(r'ephemeral\s+"random_password"\s+"[A-Za-z0-9_]+"\s*\{[^}]*\}\n'), ""),
    ("random_password's result",
     re.compile(r'ephemeral\.random_password\.[A-Za-z0-9_]+\.result'), '"tf-check-placeholder"'),
]
hits = [0] * len(rules)
for d, _, files in os.walk(root):
    for name in files:
        if not name.endswith(".tf"):
            continue
        path = os.path.join(d, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for i, (_, pattern, repl) in enumerate(rules):
            text, n = pattern.subn(repl, text)
            hits[i] += n
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
for (what, _, _), n in zip(rules, hits):
    if n == 0:
        print(f"overlay: {what} matched nothing (drop the rule?)")
