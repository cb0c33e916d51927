"""The leaderboard of a public run's folder, with the entries it did not run and the pairs it gave up on, each with
the reason."""
from harness.data.dataset import extras_path
from harness.data.jsonio import read_jsonl


def write_board(out, definitions, ours, entries, not_run):
    """The leaderboard of a public run's folder (harness/report/leaderboard.py), each entry's repository@commit in
    its provenance, and the entries not run with the reason; printed too."""
    from harness.report.leaderboard import write_leaderboard

    facts = {e.name: f"{e.repo}@{e.commit}" for e in entries}
    for name, table in write_leaderboard(out, definitions, ours, facts=facts).items():
        _append_not_run(out / "leaderboard" / f"{name}.md", not_run[name], given_up(out, name))
        print(table.to_string(index=False, na_rep="-"))
    print(f"leaderboard: {out / 'leaderboard'}/")


def given_up(out, definition_name):
    """{solution name: {reason: pairs}} of the pairs whose last word in the folder is that a run gave up on them
    (--give-up-after, --entry-budget): a later trace of the pair (a resumed run) clears it, and a pair given up on
    by a --no-resume run after an earlier one traced it (that trace now in stale/) is listed."""
    from harness.eval.record import NOT_RUN
    ep = extras_path(out, definition_name)
    last = {}   # (solution, workload) -> its last extras line (a resumed run says a NOT_RUN again: counted once)
    for _, e in read_jsonl(ep, allow_partial_tail=True) if ep.exists() else []:
        if "record" not in e:   # a pair's line, not a reference's or a state copy's
            last[(e["solution"], e["workload"])] = e
    found = {}
    for e in last.values():
        if e.get("status") == NOT_RUN:
            reasons = found.setdefault(e["solution"], {})
            reasons[e["reason"]] = reasons.get(e["reason"], 0) + 1
    return found


def _append_not_run(md, left_out, gave_up):
    """The entries this run could not time, and the pairs it gave up on, with the reason: listed, never silently
    dropped."""
    lines = ["", "## Not run here", ""]
    lines += [f"- {entry.name} ({entry.repo}@{entry.commit[:12]}): {why}" for entry, why in left_out] or ["- none"]
    if gave_up:
        lines += ["", "## Pairs given up on (no trace)", ""]
        lines += [f"- {name}: {n} workload(s) {why}" for name, reasons in gave_up.items() for why, n in reasons.items()]
    with open(md, "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
