#!/usr/bin/env python3
"""Adds recorded A-against-A comparisons to the power simulation's rounds.

Reads each `compare.json` given (a `kvcr-e2e compare` of one build against
itself), keeps the figures whose id starts with one of `--figure` prefixes,
and appends one comparison per file to src/compare/testdata/aa-rounds.json:
each figure's samples per round, in running order, as the simulation
(`compare::simulation`) draws its round pairs from them.

    scripts/record-aa-rounds.py --what "..." --figure TC-05::kvcr_deliver_bench::deliver_p10 \
        target/proof/aa-*/compare.json
"""
import argparse
import json
import pathlib

ROUNDS_FILE = pathlib.Path(__file__).resolve().parent.parent / "src/compare/testdata/aa-rounds.json"


def per_round(figure: dict, rounds: int) -> list[list[float]]:
    """The figure's samples of each round, from its base and head lists."""
    out: list[list[float]] = [[] for _ in range(rounds)]
    for side in ("base", "head"):
        for sample in figure.get(side) or []:
            out[sample["round"]].append(round(sample["value"], 3))
    return out


def comparison(path: pathlib.Path, prefixes: list[str], what: str) -> dict:
    data = json.loads(path.read_text())
    rounds = len(data["rounds"])
    figures = [
        {"id": f["id"], "label": f["label"], "statistic": f["statistic"],
         **({"family": f["family"]} if "family" in f else {}),
         "rounds": per_round(f, rounds)}
        for f in data["figures"]
        if any(f["id"].startswith(p) for p in prefixes)
    ]
    if not figures:
        raise SystemExit(f"{path}: no figure starts with {prefixes}")
    return {"what": what, "rounds": rounds, "figures": figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--what", required=True, help="what the runs were (commit, date, trials)")
    parser.add_argument("--figure", action="append", required=True, help="a figure id prefix to keep")
    parser.add_argument("compare_json", nargs="+", type=pathlib.Path)
    args = parser.parse_args()
    recorded = json.loads(ROUNDS_FILE.read_text())
    for path in args.compare_json:
        recorded["comparisons"].append(comparison(path, args.figure, args.what))
    ROUNDS_FILE.write_text(json.dumps(recorded, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
