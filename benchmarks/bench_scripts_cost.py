"""What reading scripts without spaces and joining paragraph ends costs on English text: the
index build and ``delink_risk`` of this checkout beside another (``--peer``, e.g. main's
checkout), in the same run, on the scale slice.

Workload: the first ``--documents`` articles (default 2,500) of part-000 of
../shared/data/scale (English Wikipedia), both readings (the default). Each round builds
an index and times ``delink_risk`` (spaCy's tokenizer before the clock) over the first
50 articles of at most 20,000 characters, best of 3 passes, once with each checkout, in a
fresh child process whose ``PYTHONPATH`` is that checkout; the order alternates from round
to round (peer first in odd rounds). The machine is shared: medians over the rounds are
reported with every round's figure, and the ratios are ours over the peer's.

    python benchmarks/bench_scripts_cost.py --peer /path/to/base-checkout [--rounds 5] [--out r.json]

The peer must not change during the run (a checkout of a fixed commit, e.g. ``git archive
<base> | tar -x -C /tmp/peer-base``): main's checkout may be merged into meanwhile. Each
checkout first builds a 50-document index off the clock, which compiles its kernels.

Target (issue #34): build seconds and delink_risk ms per 1,000 tokens within 5% of the peer.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
SCALE = HERE.parent.parent / "shared" / "data" / "scale"
CHILD = r"""
import gzip, itertools, json, sys, tempfile, time
from pathlib import Path
import spacy
from spacy_delink.linkage.index import IndexBuilder
from spacy_delink.linkage.tokenize import LinkageRules

path, documents = sys.argv[1], int(sys.argv[2])
def stream():
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in itertools.islice(handle, documents):
            record = json.loads(line)
            yield record["id"], record["text"]
with tempfile.TemporaryDirectory() as folder:
    out = Path(folder) / "index"
    started = time.perf_counter()
    summary = IndexBuilder(LinkageRules(), progress=False).build(stream(), out)
    build = time.perf_counter() - started
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    texts = [t for _, t in itertools.islice((d for d in stream() if len(d[1]) <= 20000), 50)]
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": str(out), "k": 2})
    docs = [nlp.make_doc(t) for t in texts]
    risk = nlp.get_pipe("delink_risk")
    risk(docs[0])
    passes = []
    for _ in range(3):
        started = time.perf_counter()
        for doc in docs:
            risk(doc)
        passes.append(time.perf_counter() - started)
    tokens = sum(len(d) for d in docs)
print(json.dumps({"build_seconds": build, "index_bytes": size, "tokens": summary.tokens,
                  "risk_ms_per_1000_tokens": 1000 * min(passes) / tokens * 1000}))
"""


def measure(root: Path, documents: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(SCALE / "part-000.jsonl.gz"), str(documents)],
        cwd=root, env=env, capture_output=True, text=True, check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", type=Path, required=True, help="the other checkout (its root)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--documents", type=int, default=2500)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not (SCALE / "part-000.jsonl.gz").exists():
        sys.exit(f"scale corpus missing: {SCALE}/part-000.jsonl.gz; put ../shared/data/scale beside the checkout")
    rounds: dict[str, list[dict[str, Any]]] = {"ours": [], "peer": []}
    for root in (args.peer, HERE):  # compiles each checkout's kernels into its numba cache, off the clock
        measure(root, 50)
    for number in range(args.rounds):
        order = [("peer", args.peer), ("ours", HERE)] if number % 2 == 0 else [("ours", HERE), ("peer", args.peer)]
        for name, root in order:
            rounds[name].append({**measure(root, args.documents), "load": os.getloadavg()[0]})
            print(name, rounds[name][-1], file=sys.stderr, flush=True)
    medians = {
        name: {key: statistics.median(r[key] for r in rows) for key in ("build_seconds", "risk_ms_per_1000_tokens", "index_bytes")}
        for name, rows in rounds.items()
    }
    spread = {
        name: {key: (max(r[key] for r in rows) - min(r[key] for r in rows)) / statistics.median(r[key] for r in rows)
               for key in ("build_seconds", "risk_ms_per_1000_tokens")}
        for name, rows in rounds.items()
    }
    output = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "workload": {"corpus": "scale part-000", "documents": args.documents, "readings": ["exact", "search"]},
        "peer": str(args.peer),
        "medians": medians,
        "ratios": {key: medians["ours"][key] / medians["peer"][key] for key in ("build_seconds", "risk_ms_per_1000_tokens", "index_bytes")},
        "spread_over_median": spread,
        "rounds": rounds,
    }
    text = json.dumps(output, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
