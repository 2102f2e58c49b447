"""Mutation sites of KVCR modules, through cosmic-ray's operator API.

Run by `kvcr-e2e mutants --generated` with the `mutgen` env's interpreter
(cosmic-ray 8.7.0, fixtures/python/requirements-mutgen.lock). It never runs
a test and never writes a source file; the Rust side samples the sites and
makes each mutated module a unified diff.

  sites ROOT MODULE...   one JSON object per line and site: the operators of
                         cosmic-ray's `init` (those without arguments), in
                         its order; occurrence counts per module and operator
                         (as `cosmic-ray apply` takes it); sites inside type
                         annotations are left out
  mutate ROOT N          stdin: a JSON list of {module, operator,
                         occurrence}, in draw order; stdout: its entries in
                         that order up to the N-th that compiles, each with
                         `mutated` (the whole mutated module) or `skipped`
                         (why not: the operator made no change, or the
                         result is not valid Python)
"""

import json
import sys
from pathlib import Path

import cosmic_ray.plugins
from cosmic_ray.ast import ast_nodes, get_ast_from_path
from cosmic_ray.ast.ast_query import ASTQuery
from cosmic_ray.mutating import mutate_code
from cosmic_ray.util import read_python_source


def operators():
    for name in cosmic_ray.plugins.operator_names():
        operator_class = cosmic_ray.plugins.get_operator(name)
        # As `cosmic-ray init` without operator settings does.
        if not operator_class.arguments():
            yield name, operator_class()


def annotations(tree):
    """(start, end) of every type annotation: a parameter's, a return's, an
    annotated assignment's. A mutation there changes no behaviour (with
    postponed annotations) or only fails the import (without), so its sites
    are left out."""
    spans = []
    for node in ast_nodes(tree):
        if node.type == "param" or node.type == "funcdef":
            annotation = node.annotation
        elif node.type == "annassign":
            annotation = node.children[1]
        else:
            continue
        if annotation is not None:
            spans.append((annotation.start_pos, annotation.end_pos))
    return spans


def sites(root, modules):
    ops = list(operators())
    for module in modules:
        tree = get_ast_from_path(Path(root) / module)
        spans = annotations(tree)
        for name, operator in ops:
            positions = (
                (node, start, end)
                for node in ast_nodes(tree)
                for start, end in operator.mutation_positions(node)
            )
            # Occurrences count every position, as cosmic-ray's own do.
            for occurrence, (node, start, end) in enumerate(positions):
                if any(a <= start < b for a, b in spans):
                    continue
                print(
                    json.dumps(
                        {
                            "module": module,
                            "operator": name,
                            "occurrence": occurrence,
                            "start": list(start),
                            "end": list(end),
                            "definition": ASTQuery(node).get_definition_name(),
                        }
                    )
                )


def mutate(root, want):
    sources = {}
    drawn = []
    valid = 0
    for site in json.load(sys.stdin):
        if valid == want:
            break
        module = site["module"]
        if module not in sources:
            sources[module] = read_python_source(Path(root) / module)
        operator = cosmic_ray.plugins.get_operator(site["operator"])()
        mutated = mutate_code(sources[module], operator, site["occurrence"])
        if mutated is None or mutated == sources[module]:
            site["skipped"] = "the operator changed nothing at this occurrence"
        else:
            try:
                compile(mutated, module, "exec")
                site["mutated"] = mutated
                valid += 1
            except SyntaxError as e:
                site["skipped"] = f"not valid Python: {e.msg} (line {e.lineno})"
        drawn.append(site)
    json.dump(drawn, sys.stdout)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "sites":
        sites(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 4 and sys.argv[1] == "mutate":
        mutate(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
