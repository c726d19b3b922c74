"""Per-file counts of a cargo-mutants run (scripts/mutants.sh): tested,
caught, missed, timeout, unviable, read from its outcome lists, so that a
run cut short by its time budget still reports what it tested. The missed
mutants are listed after the table: each is a behaviour no test pins, or an
equivalent mutant (docs/testing.md)."""

import collections
import pathlib
import sys

KINDS = ("caught", "missed", "timeout", "unviable")


def main(out: pathlib.Path) -> None:
    counts = collections.defaultdict(collections.Counter)
    missed = []
    for kind in KINDS:
        listing = out / f"{kind}.txt"
        if not listing.exists():
            continue
        for line in listing.read_text().splitlines():
            if not line.strip():
                continue
            counts[line.split(":", 1)[0]][kind] += 1
            if kind == "missed":
                missed.append(line)
    if not counts:
        print(f"no mutant outcomes under {out}")
        return
    header = ("file", "tested") + KINDS
    rows = [
        (f, sum(c.values())) + tuple(c[k] for k in KINDS) for f, c in sorted(counts.items())
    ]
    total = collections.Counter()
    for c in counts.values():
        total.update(c)
    rows.append(("total", sum(total.values())) + tuple(total[k] for k in KINDS))
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for row in rows:
        print("| " + " | ".join(str(x) for x in row) + " |")
    if missed:
        print("\nmissed:")
        for line in missed:
            print("  " + line)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
