"""Load and build solution JSONs with FlashInfer-Bench's own code, as the official evaluator would at the start of
a run: its dataset loader (TraceSet.from_path) must accept a dataset root holding them, and its BuilderRegistry
must build each one for its definition (for python/triton solutions that imports the module; the signature check
runs too). FlashInfer-Bench is not part of this project: put its source on PYTHONPATH (with its own needs:
pydantic, pyyaml, docstring-parser, filelock, flashinfer), e.g.

    PYTHONPATH=/path/to/flashinfer-bench:$PYTHONPATH python tools/fib_check.py results/package/*/solution.json

Prints one line per solution and exits 1 if any is refused or fails to build."""
import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def stage(solutions, dataset, root):
    """A FlashInfer-Bench dataset root: the dataset's definitions, and the solution JSONs as given (byte copies)."""
    shutil.copytree(Path(dataset) / "definitions", root / "definitions")
    for i, path in enumerate(map(Path, solutions)):
        target = root / "solutions" / f"{i:03d}" / path.name
        target.parent.mkdir(parents=True)
        shutil.copyfile(path, target)


def check(solutions, dataset):
    """[(name or file, 'ok' or the reason)]: the load first (it refuses the whole root), then each build."""
    try:
        from flashinfer_bench.compile import BuilderRegistry
        from flashinfer_bench.data import TraceSet
    except ImportError as exc:
        raise SystemExit(f"error: FlashInfer-Bench is not importable ({exc}); put its source on PYTHONPATH")
    with tempfile.TemporaryDirectory(prefix="fib-check-") as tmp:
        stage(solutions, dataset, Path(tmp))
        try:
            trace_set = TraceSet.from_path(tmp)
        except Exception as exc:    # the official loader's refusal: nothing of that root would run
            return [(", ".join(map(str, solutions)), f"refused by FlashInfer-Bench's loader: {exc}")]
        rows = []
        for definition_name, sols in sorted(trace_set.solutions.items()):
            definition = trace_set.definitions[definition_name]
            for sol in sols:
                try:
                    runnable = BuilderRegistry.get_instance().build(definition, sol)
                    rows.append((sol.name, f"ok: loaded and built ({type(runnable).__name__})"))
                except Exception as exc:
                    rows.append((sol.name, f"build failed: {type(exc).__name__}: {exc}"))
        return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("solutions", nargs="+", help="solution JSON files")
    ap.add_argument("--dataset", default=str(REPO / "workloads"), help="dataset root whose definitions/ to use")
    args = ap.parse_args(argv)
    missing = [p for p in args.solutions if not Path(p).is_file()]
    if missing:
        print(f"error: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    rows = check(args.solutions, args.dataset)
    for name, verdict in rows:
        print(f"{name}: {verdict}")
    failed = [r for r in rows if not r[1].startswith("ok")]
    print(f"{len(rows) - len(failed)} of {len(rows)} loaded and built by FlashInfer-Bench")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
