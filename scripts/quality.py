#!/usr/bin/env python3
"""Reads the coverage and mutation tools' reports, writes the gate's summaries and enforces the
floors in quality/gate.toml. Prints a table on stdout; says on stderr what fell short.

  quality.py coverage REPORT.json SUMMARY.json   (cargo-tarpaulin's JSON report)
  quality.py mutation OUTCOMES.json STATS.json [--sample]   (cargo-mutants' outcomes.json)

Exit status 1 when a floor is not met, 2 on a report it cannot read.
"""

import json
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def gate():
    with open(ROOT / "quality" / "gate.toml", "rb") as f:
        return tomllib.load(f)


def rel(path):
    p = Path(path)
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(p)


def crate_of(relpath):
    parts = relpath.split("/")
    if len(parts) > 2 and parts[0] == "crates":
        return parts[1]
    return None


def pct(num, den):
    return 100.0 * num / den if den else 100.0


def table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def coverage(report_path, summary_path):
    report = json.loads(Path(report_path).read_text())
    floors = gate().get("coverage", {}).get("floors", {})
    crates = defaultdict(lambda: [0, 0])
    files = {}
    for f in report.get("files", []):
        path = rel("/".join(f["path"]).replace("//", "/"))
        crate = crate_of(path)
        if crate is None or "/src/" not in path:
            continue
        covered, coverable = f.get("covered", 0), f.get("coverable", 0)
        files[path] = {"covered": covered, "coverable": coverable, "percent": round(pct(covered, coverable), 2)}
        crates[crate][0] += covered
        crates[crate][1] += coverable
    if not crates:
        print(f"error: {report_path} names no file under crates/*/src", file=sys.stderr)
        print("hint: run scripts/coverage from the repository's root", file=sys.stderr)
        return 2
    summary = {
        "tool": "cargo-tarpaulin (LLVM engine), line coverage",
        "crates": {c: {"covered": v[0], "coverable": v[1], "percent": round(pct(*v), 2)} for c, v in sorted(crates.items())},
        "files": dict(sorted(files.items())),
        "floors": floors,
        "failures": [],
    }
    rows = []
    for name, floor in sorted(floors.items()):
        got = summary["files" if "/" in name else "crates"].get(name)
        if got is None:
            summary["failures"].append(f"{name}: no coverage figure (floor {floor}%)")
            continue
        if got["percent"] < floor:
            summary["failures"].append(f"{name}: {got['percent']:.1f}% of lines, under the floor of {floor}%")
    # A crate nobody set a floor for would fall without the gate noticing.
    for c in summary["crates"]:
        if c not in floors:
            summary["failures"].append(f"{c}: no floor in quality/gate.toml (measured {summary['crates'][c]['percent']:.1f}%)")
    for c, v in summary["crates"].items():
        rows.append([c, v["covered"], v["coverable"], f"{v['percent']:.1f}%", f"{floors[c]}%" if c in floors else "-"])
    for name in sorted(k for k in floors if "/" in k):
        v = files.get(name, {"covered": 0, "coverable": 0, "percent": 0.0})
        rows.append([name, v["covered"], v["coverable"], f"{v['percent']:.1f}%", f"{floors[name]}%"])
    Path(summary_path).write_text(json.dumps(summary, indent=2) + "\n")
    print(table(["crate or file", "covered", "lines", "percent", "floor"], rows))
    for failure in summary["failures"]:
        print(f"error: coverage {failure}", file=sys.stderr)
    if summary["failures"]:
        print("hint: add tests for the uncovered lines (var/coverage/tarpaulin-report.html shows them),", file=sys.stderr)
        print("hint: or give a new crate its floor under [coverage.floors] in quality/gate.toml", file=sys.stderr)
        return 1
    return 0


KINDS = {"CaughtMutant": "caught", "MissedMutant": "missed", "Timeout": "timeout", "Unviable": "unviable"}


def mutation(outcomes_path, stats_path, sample):
    data = json.loads(Path(outcomes_path).read_text())
    floors = gate().get("mutation", {})
    min_score = floors.get("sample_min_score" if sample else "min_score", 80)
    per_file = defaultdict(lambda: {"caught": 0, "missed": 0, "timeout": 0, "unviable": 0, "survivors": []})
    baseline_ok = True
    for o in data.get("outcomes", []):
        scenario = o.get("scenario")
        summary = o.get("summary")
        if scenario == "Baseline":
            baseline_ok = summary == "Success"
            continue
        mutant = scenario.get("Mutant") if isinstance(scenario, dict) else None
        if mutant is None:
            continue
        kind = KINDS.get(summary)
        if kind is None:
            print(f"error: mutant outcome '{summary}' is not one this script knows", file=sys.stderr)
            return 2
        entry = per_file[mutant["file"]]
        entry[kind] += 1
        if kind == "missed":
            span = mutant.get("span", {}).get("start", {})
            entry["survivors"].append(
                mutant.get("name") or f"{mutant['file']}:{span.get('line', '?')}:{span.get('column', '?')}"
            )
    if not baseline_ok:
        print("error: the unmutated tree's tests failed, so no mutant was judged", file=sys.stderr)
        return 1
    totals = {k: sum(f[k] for f in per_file.values()) for k in ("caught", "missed", "timeout", "unviable")}
    detected = totals["caught"] + totals["timeout"]
    score = pct(detected, detected + totals["missed"])
    stats = {
        "tool": f"cargo-mutants {data.get('cargo_mutants_version', '')}".strip(),
        "sample": sample,
        "total_mutants": sum(totals.values()),
        **totals,
        "score": round(score, 2),
        "min_score": min_score,
        "files": {f: v for f, v in sorted(per_file.items())},
    }
    Path(stats_path).write_text(json.dumps(stats, indent=2) + "\n")
    rows = []
    for f, v in sorted(per_file.items()):
        d = v["caught"] + v["timeout"]
        rows.append([f, v["caught"], v["timeout"], v["missed"], v["unviable"], f"{pct(d, d + v['missed']):.1f}%"])
    rows.append(["total", totals["caught"], totals["timeout"], totals["missed"], totals["unviable"], f"{score:.1f}%"])
    print(table(["file", "caught", "timeout", "missed", "unviable", "score"], rows))
    if detected + totals["missed"] == 0:
        print("error: no mutant was built and tested", file=sys.stderr)
        return 1
    if score < min_score:
        print(f"error: mutation score {score:.1f}% is under the floor of {min_score}%", file=sys.stderr)
        print(f"hint: {stats_path} lists the surviving mutants by file; add tests that catch them", file=sys.stderr)
        return 1
    return 0


def main(argv):
    try:
        if len(argv) == 3 and argv[0] == "coverage":
            return coverage(argv[1], argv[2])
        if len(argv) in (3, 4) and argv[0] == "mutation":
            return mutation(argv[1], argv[2], sample=argv[3:] == ["--sample"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: cannot read the report: {e}", file=sys.stderr)
        return 2
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
