#!/usr/bin/env python3
"""Collect every binky.toml that binky 0.1.2's own sdist holds, and keep the ones 0.1.2 accepts.

Usage: extract_012.py SDIST.tar.gz OUT_DIR   (run with a Python that has binky==0.1.2 installed)

Sources, read from the sdist (nothing of it is committed to this repository):
- `*.toml` files other than pyproject.toml (the examples), with the files beside them;
- fenced ```toml blocks and <pre> blocks of the docs (README, TROUBLESHOOTING, llms.txt, site/);
- in the Python tests and scripts: string literals and f-strings holding `[project]` (an
  f-string's `{py}` becomes `python3`, any other placeholder its name), and dict literals
  with a "project" key (as passed to `load_config_data`), a `**extra` of a parametrized
  test expanded once per parameter.

Each candidate is judged by 0.1.2 itself (`load_config_data` after `tomllib`); OUT_DIR gets
one directory per accepted config (`binky.toml`, the example's other files, `SOURCE`) and
`manifest.json` listing every candidate with 0.1.2's verdict.
"""

import ast
import html
import json
import re
import shutil
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path

from binky.config import ConfigError, load_config_data

DOC_SUFFIXES = {".md", ".txt", ".html"}


def toml_dump(data, prefix=""):
    """A minimal TOML writer for the dict configs (strings, bools, ints, lists, tables)."""

    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{key(k)} = {value(x)}" for k, x in v.items()) + " }"
        raise TypeError(type(v))

    def key(k):
        return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)

    out = []
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    if prefix and (scalars or not tables):
        out.append(f"[{prefix}]")
    for k, v in scalars.items():
        out.append(f"{key(k)} = {value(v)}")
    for k, v in tables.items():
        name = f"{prefix}.{key(k)}" if prefix else key(k)
        out.append(toml_dump(v, name))
    return "\n".join(out) + "\n"


class Render:
    """Evaluates an f-string with stand-ins for its placeholders."""

    @staticmethod
    def joined(node):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                expr = v.value
                name = expr.id if isinstance(expr, ast.Name) else ast.unparse(expr)
                parts.append("python3" if name in ("py", "sys.executable", "PY") else name)
        return "".join(parts)


def python_candidates(path, rel):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    # Parametrized values: test function name -> {argname: [values]}
    params = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        for dec in fn.decorator_list:
            if (
                isinstance(dec, ast.Call)
                and ast.unparse(dec.func).endswith("parametrize")
                and len(dec.args) >= 2
            ):
                try:
                    names = ast.literal_eval(dec.args[0])
                    values = ast.literal_eval(dec.args[1])
                except (ValueError, SyntaxError):
                    continue
                if isinstance(names, str) and "," not in names:
                    params.setdefault(fn, {})[names] = values
    # Each node once, with the test function it is in (for its parameters); the pieces of
    # an f-string are read as the whole f-string only.
    owner = {}
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        for node in ast.walk(fn):
            owner.setdefault(id(node), fn)
    pieces = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        fn = owner.get(id(node))
        if id(node) in pieces:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "[project]" in node.value:
                yield f"{rel}:{node.lineno}", "toml", node.value
        elif isinstance(node, ast.JoinedStr):
            text = Render.joined(node)
            if "[project]" in text:
                yield f"{rel}:{node.lineno}", "toml", text
        elif isinstance(node, ast.Dict):
            keys = [k.value if isinstance(k, ast.Constant) else None for k in node.keys]
            # A config's [project] is a table (an RPC payload's "project" is a name).
            if "project" not in keys or not isinstance(
                node.values[keys.index("project")], ast.Dict
            ):
                continue
            variants = expand_dict(node, params.get(fn, {}))
            for i, data in enumerate(variants):
                tag = f"{rel}:{node.lineno}" + (f"#{i + 1}" if len(variants) > 1 else "")
                yield tag, "dict", data


def expand_dict(node, params):
    """literal_eval a dict, with `**name` spreads replaced by each parametrized value."""
    spreads = []

    class Sub(ast.NodeTransformer):
        def visit_Dict(self, d):
            self.generic_visit(d)
            for k, v in zip(d.keys, d.values):
                if k is None and isinstance(v, ast.Name):
                    spreads.append(v.id)
            return d

    Sub().visit(node)
    names = sorted(set(spreads))
    if not names:
        try:
            return [ast.literal_eval(node)]
        except (ValueError, SyntaxError):
            return []
    if len(names) != 1 or names[0] not in params:
        return []
    out = []
    for value in params[names[0]]:
        src = ast.unparse(node).replace(f"**{names[0]}", ast.unparse(ast.Constant(None)) + ": None")
        try:
            data = ast.literal_eval(src)
        except (ValueError, SyntaxError):
            continue

        def merge(d):
            if None in d:
                d.pop(None)
                d.update(value)
            for v in d.values():
                if isinstance(v, dict):
                    merge(v)

        merge(data)
        out.append(data)
    return out


def doc_candidates(path, rel):
    text = path.read_text(encoding="utf-8", errors="replace")
    blocks = re.findall(r"```(?:toml)?\n(.*?)```", text, flags=re.S)
    if path.suffix == ".html":
        blocks += [
            html.unescape(re.sub(r"<[^>]+>", "", b))
            for b in re.findall(r"<pre[^>]*>(.*?)</pre>", text, flags=re.S)
        ]
    for i, block in enumerate(blocks):
        if "[project]" in block:
            yield f"{rel}#block{i + 1}", "toml", block


def main():
    sdist, out = Path(sys.argv[1]), Path(sys.argv[2])
    work = Path(tempfile.mkdtemp())
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    root = next(work.iterdir())
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    candidates = []
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if not path.is_file() or rel.startswith("src/"):
            continue
        if path.suffix == ".toml" and path.name != "pyproject.toml":
            candidates.append((rel, "toml", path.read_text(encoding="utf-8"), path.parent))
        elif path.suffix == ".py":
            candidates += [(s, k, t, None) for s, k, t in python_candidates(path, rel)]
        elif path.suffix in DOC_SUFFIXES:
            candidates += [(s, k, t, None) for s, k, t in doc_candidates(path, rel)]
    manifest, seen, n = [], set(), 0
    for source, kind, body, beside in candidates:
        if kind == "toml":
            try:
                data = tomllib.loads(body)
            except tomllib.TOMLDecodeError as e:
                manifest.append({"source": source, "accepted": False, "why": f"not TOML: {e}"})
                continue
            text = body
        else:
            data, text = body, toml_dump(body)
        key = json.dumps(data, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        try:
            load_config_data(data)
        except ConfigError as e:
            manifest.append({"source": source, "accepted": False, "why": str(e)})
            continue
        n += 1
        slug = re.sub(r"[^a-z0-9]+", "-", source.lower()).strip("-")[-48:]
        d = out / f"{n:03d}-{slug}"
        if beside is not None:
            shutil.copytree(beside, d)
        else:
            d.mkdir()
        (d / "binky.toml").write_text(text, encoding="utf-8")
        (d / "SOURCE").write_text(source + "\n", encoding="utf-8")
        manifest.append({"source": source, "accepted": True, "dir": d.name})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    shutil.rmtree(work)
    print(f"{n} configs binky 0.1.2 accepts, of {len(manifest)} found, in {out}")


if __name__ == "__main__":
    main()
