"""The first line of the statement that holds each given line of a KVCR
module, by Python's own parser.

Run by `kvcr-e2e mutants --generated N --coverage RUN_DIR,...` with the base
env's interpreter. coverage.py reports a statement that spans several lines
under its first line only, so a mutation site on a later line of one (a
continuation line) is looked up at that first line.

  statement_lines.py ROOT
    ROOT    the directory that holds the `kvcr` package
    stdin   a JSON list of [module, line] pairs (`kvcr/core.py`, 1-based)
    stdout  a JSON list, in that order: the first line of the innermost
            statement whose lines include it, or null where no statement
            does (a blank line, a comment, a top-level definition's
            decorator)
"""

import ast
import json
import os
import sys
import tokenize


def first_lines(path):
    with tokenize.open(path) as f:
        tree = ast.parse(f.read(), path)
    first = {}

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                # A statement inside this one is visited later and takes
                # its own lines over: the innermost one wins.
                for line in range(child.lineno, child.end_lineno + 1):
                    first[line] = child.lineno
            visit(child)

    visit(tree)
    return first


def main(root):
    modules = {}
    out = []
    for module, line in json.load(sys.stdin):
        if module not in modules:
            modules[module] = first_lines(os.path.join(root, module))
        out.append(modules[module].get(line))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
