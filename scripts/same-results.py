#!/usr/bin/env python3
"""Does a refactor keep a run's results the same? Prints, or compares, what must not change.

    scripts/same-results.py RESULTS_JSON               # the shape of one run, as JSON
    scripts/same-results.py BEFORE_JSON AFTER_JSON     # exit 1, with the differences, if they differ

Either JSON may be a results.json or a shape the first form wrote.

The shape is what a change of structure must leave alone, and nothing that is measured: every key
path of results.json (array positions folded to `[]`; but for MEASURED_PRESENCE, keys present only
when a measurement calls for them), each level's label (its kind and its place
on every dimension of the plan: concurrency, lengths, rate, repeat, thinking budget, response
format, adapters) in order, with the plan line that names them as servetop labels them, its request, failure and token counts, and the finding ids in order. Times, rates and the findings'
texts are left out, so two runs of the same seeded plan compare equal. scripts/same-results.sh runs
the two plans the structure check uses and compares them between two servetop binaries.
"""
import json
import sys

# What names a level: its place on each dimension of the plan.
IDENTITY = ("index", "kind", "concurrency", "input_len", "output_len", "context_tokens", "requests",
            "request_rate", "repeat", "content", "thinking_budget", "response_format", "turns")
# Keys written only when a measurement calls for them (a level with a held read; a twin whose
# TPOT grew most that is not the first): their presence is measured, so it is not compared.
MEASURED_PRESENCE = {"held_reads", "held_read_share", "held_first_tokens", "worst_tpot_p50_pct"}
# Counts the plan and the seed fix (not the clock).
COUNTS = ("completed", "failed", "cancelled", "total_input_tokens", "total_output_tokens")


def key_paths(value, path, out):
    if isinstance(value, dict):
        for k, v in value.items():
            p = f"{path}.{k}" if path else k
            out.add(p)
            key_paths(v, p, out)
    elif isinstance(value, list):
        for v in value:
            key_paths(v, path + "[]", out)


def level_lists(results):
    """The run's levels: every top-level list of objects that have an `index`, in file order."""
    for name, value in results.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) and "index" in v for v in value):
            yield name, value


def level_row(name, lv):
    label = [name] + [f"{k}={json.dumps(lv[k], sort_keys=True)}" for k in IDENTITY
                      if k in lv and not isinstance(lv[k], list)]
    if isinstance(lv.get("lora"), dict):
        label.append("lora=" + ",".join(sorted(lv["lora"])))
    row = {"label": " ".join(label)}
    for k in COUNTS:
        if isinstance(lv.get(k), (int, float)):
            row[k] = lv[k]
    if isinstance(lv.get("lora"), dict):
        row["lora_completed"] = {a: v.get("completed") for a, v in sorted(lv["lora"].items())}
    return row


def shape(results):
    keys = set()
    key_paths(results, "", keys)
    keys = {k for k in keys if k.rsplit(".", 1)[-1] not in MEASURED_PRESENCE}
    levels = [level_row(name, lv) for name, lvs in level_lists(results) for lv in lvs]
    findings = [f.get("id") for f in results.get("findings", [])]
    # The plan line names the levels as servetop labels them, before anything is measured.
    levels.insert(0, {"plan": results.get("plan")})
    return {"keys": sorted(keys), "levels": levels, "findings": findings}


def load(path):
    """The shape of a results.json, or a shape this script wrote before."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return data if set(data) == {"keys", "levels", "findings"} else shape(data)


def main(argv):
    if len(argv) == 2:
        json.dump(load(argv[1]), sys.stdout, indent=1)
        print()
        return 0
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    a, b = load(argv[1]), load(argv[2])
    bad = 0
    gone = sorted(set(a["keys"]) - set(b["keys"]))
    new = sorted(set(b["keys"]) - set(a["keys"]))
    for k in gone:
        print(f"key gone: {k}")
    for k in new:
        print(f"key new: {k}")
    bad += len(gone) + len(new)
    if len(a["levels"]) != len(b["levels"]):
        print(f"levels: {len(a['levels'])} before, {len(b['levels'])} after")
        bad += 1
    for i, (x, y) in enumerate(zip(a["levels"], b["levels"])):
        if x != y:
            print(f"level {i}: before {x}\n         after  {y}")
            bad += 1
    if a["findings"] != b["findings"]:
        print(f"finding ids: before {a['findings']}\n             after  {b['findings']}")
        bad += 1
    print(f"{bad} difference(s): {len(a['keys'])} key paths, {len(a['levels'])} levels, "
          f"{len(a['findings'])} findings before")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
