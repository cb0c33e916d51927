"""Getting each entry's Solution JSON into the cache (.cache/public): copied from a folder of pre-packed JSONs, or
packed from a clone of its repository at the pinned commit."""
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness import REPO
from harness.data.jsonio import DataError, write_json_atomic
from harness.data.solution import BuildSpec, Solution, SourceFile, check_source_path
from harness.data.starter_kit import SKIP_PARTS, SKIP_SUFFIXES
from harness.public.entries import PublicEntry

DEFAULT_CACHE = REPO / ".cache" / "public"


@dataclass
class FetchResult:
    entry: PublicEntry
    path: Path | None              # the JSON in the cache (fetched now, or kept from earlier), None when none is
    status: str                    # "fetched", "missing", "refused" or "not fetched"
    reason: str = ""
    earlier: str = ""              # not fetched now: the copy fetched earlier was "kept" or "removed"; "" if none
    earlier_reason: str = ""       # why it was removed: the cache check's words

    def earlier_said(self):
        """What the entry's line says of the copy fetched earlier ("" when there was none)."""
        if self.earlier == "kept":
            return "kept the copy fetched earlier"
        if self.earlier == "removed":
            return f"removed the copy fetched earlier, no longer valid for the facts ({self.earlier_reason})"
        return ""


def cache_path(cache_dir, entry):
    return Path(cache_dir) / entry.definition / f"{entry.name}.json"


def record_commit(target, entry):
    """Beside a JSON put into the cache, the commit it was packed from (a --from folder's: the facts' own)."""
    target.with_suffix(".commit").write_text(entry.commit + "\n")


def load_checked(path, entry):
    """The Solution in `path`, through our loader, and it must be the entry the facts describe."""
    sol = Solution.load(path)
    if (sol.name, sol.definition) != (entry.name, entry.definition):
        raise DataError(path, f"holds solution '{sol.name}' for '{sol.definition}', the facts say '{entry.name}' "
                              f"for '{entry.definition}'")
    return sol


def load_cached(path, entry):
    """The Solution of a JSON in the cache: load_checked, and packed from the commit the facts pin now (the facts
    may have moved on since it was fetched)."""
    recorded = path.with_suffix(".commit")
    commit = recorded.read_text().strip() if recorded.is_file() else None
    if commit != entry.commit:
        raise DataError(path, f"packed from {commit[:12]}, the facts pin {entry.commit[:12]}" if commit else
                        "no record of the commit it was packed from", "run gdn-harness public fetch again")
    return load_checked(path, entry)


def fetch_state(cache_dir, entry):
    """(is it in the cache and loadable, why not)."""
    path = cache_path(cache_dir, entry)
    if not path.is_file():
        return False, "not fetched (gdn-harness public fetch)"
    try:
        load_cached(path, entry)
    except DataError as exc:
        return False, f"refused: {exc}"
    return True, ""


def fetch(entries, cache_dir, source=None):
    """Every entry's Solution JSON into cache_dir/<definition>/<name>.json: copied from `source` (a folder laid out
    the same way), or, without it, packed from a clone of its repository. One FetchResult per entry, in order.
    An entry not fetched now (no network, a missing or refused JSON) keeps the copy fetched earlier while that copy
    passes the check `public list` and `public run` make (fetch_state: it loads, and is the solution and definition
    the facts name); one that no longer passes is removed, so nothing the facts refuse is left to run. The result
    says which (FetchResult.earlier): a machine without network keeps what it was given."""
    results = fetch_from_folder(entries, cache_dir, Path(source)) if source else fetch_from_git(entries, cache_dir)
    for r in results:
        if r.status != "fetched":
            keep_or_remove_earlier(r, cache_dir)
    return results


def keep_or_remove_earlier(result, cache_dir):
    """The copy fetched earlier of an entry not fetched now: kept if still valid for the facts, else removed."""
    path = cache_path(cache_dir, result.entry)
    if not path.is_file():
        return
    valid, why = fetch_state(cache_dir, result.entry)
    if valid:
        result.path, result.earlier = path, "kept"
    else:
        path.unlink()
        path.with_suffix(".commit").unlink(missing_ok=True)
        result.earlier, result.earlier_reason = "removed", why


def fetch_from_folder(entries, cache_dir, source):
    if not source.is_dir():
        raise DataError(source, "no such folder", "give a folder laid out <definition>/<name>.json")
    check_layout(entries, source)
    results = []
    for entry in entries:
        src = cache_path(source, entry)
        if not src.is_file():   # a whole definition's folder missing is said once per entry, alike
            results.append(FetchResult(entry, None, "missing", f"{src if src.parent.is_dir() else src.parent} "
                                                              "does not exist"))
            continue
        try:
            load_checked(src, entry)
        except DataError as exc:
            results.append(FetchResult(entry, None, "refused", str(exc)))
            continue
        target = cache_path(cache_dir, entry)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
        record_commit(target, entry)
        results.append(FetchResult(entry, target, "fetched"))
    return results


def not_entries(entries, source):
    """The JSONs of a --from folder, laid out <definition>/<name>.json, that name no entry: fetch leaves them out."""
    known = {(e.definition, e.name) for e in entries}
    return sorted(p for p in Path(source).glob("*/*.json") if (p.parent.name, p.stem) not in known)


def check_layout(entries, source):
    """Refuse a --from folder with no <definition>/ folder of any entry (nothing could be fetched from it); a hint
    to its parent where it looks one level too deep (named after a definition, or holding an entry's
    <name>.json itself)."""
    definitions = sorted({e.definition for e in entries})
    if not definitions or any((source / d).is_dir() for d in definitions):
        return
    too_deep = source.name in definitions or any((source / f"{e.name}.json").is_file() for e in entries)
    hint = (f"it looks one level too deep: point --from at its parent folder ({source.absolute().parent}), "
            "the one that holds <definition>/<name>.json" if too_deep
            else "give a folder laid out <definition>/<name>.json")
    raise DataError(source, f"holds no folder named after a definition ({', '.join(definitions)})", hint)


def url_for(repo):
    """Where a repository is cloned from (tests point it at a local repository)."""
    return f"https://github.com/{repo}.git"


def git(*args):
    """Run git without ever prompting (GitHub answers a missing repository with a password prompt) and for 15
    minutes at most (a stalled network would otherwise hang the fetch); a timeout reads as a failure."""
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=900,
                              env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", "timed out after 900 s")


def clone(repo, repos_dir):
    """The local clone of `repo` (made once, through a .part folder so an interrupted clone is not taken for one);
    DataError with git's own words if the clone fails."""
    target = repos_dir / repo.replace("/", "__")
    if target.is_dir():
        return target
    part = target.with_name(target.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    url = url_for(repo)
    done = git("clone", "--quiet", "--no-checkout", url, str(part))
    if done.returncode != 0:
        raise DataError(url, f"git clone {url} failed: {last_line(done.stderr)}")
    part.rename(target)
    return target


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no message"


def fetch_from_git(entries, cache_dir):
    """Clone each repository once, check out each entry's commit and pack its path. If git is missing or the first
    clone fails, the network (or git) is what is missing: said once, and no further clone is tried."""
    repos_dir = Path(cache_dir) / "repos"
    repos_dir.mkdir(parents=True, exist_ok=True)
    offline = None if shutil.which("git") else ("network needed: git is not installed, and fetching clones each "
                                                 "repository with it; use --from DIR with pre-packed JSONs")
    clones, results = {}, []   # repo -> its clone's folder, or why the clone failed
    for entry in entries:
        if not offline and entry.repo not in clones:
            try:
                clones[entry.repo] = clone(entry.repo, repos_dir)
            except DataError as exc:
                clones[entry.repo] = exc.message
                if not any(isinstance(c, Path) for c in clones.values()):  # nothing cloned yet: not this repo's fault
                    offline = f"network needed: {exc.message}; use --from DIR with pre-packed JSONs"
        checkout = clones.get(entry.repo)
        if offline or isinstance(checkout, str):
            results.append(FetchResult(entry, None, "not fetched", offline or checkout))
            continue
        results.append(pack_at_commit(entry, checkout, cache_dir))
    return results


def pack_at_commit(entry, checkout, cache_dir):
    done = git("-C", str(checkout), "checkout", "--quiet", "--force", "--detach", entry.commit)
    if done.returncode != 0:   # a clone made before the facts pinned a later commit: fetch, then try again
        git("-C", str(checkout), "fetch", "--quiet", "origin")
        done = git("-C", str(checkout), "checkout", "--quiet", "--force", "--detach", entry.commit)
    if done.returncode != 0:
        return FetchResult(entry, None, "not fetched",
                           f"git checkout {entry.commit} in {checkout} failed: {last_line(done.stderr)}")
    root = checkout / entry.path
    if not root.exists():
        return FetchResult(entry, None, "missing", f"{entry.repo}@{entry.commit[:12]} has no {entry.path}")
    try:
        sol = pack(entry, root)
    except DataError as exc:
        return FetchResult(entry, None, "refused", str(exc))
    target = cache_path(cache_dir, entry)
    write_json_atomic(target, sol.to_json())
    record_commit(target, entry)
    return FetchResult(entry, target, "fetched")


def pack(entry, root):
    """A Solution from the facts' spec and the sources at `root`, validated as a JSON file is."""
    spec = BuildSpec(language=entry.language, target_hardware=["cuda"], entry_point=entry.entry_point,
                     dependencies=entry.dependencies, destination_passing_style=entry.dps, binding=entry.binding)
    description = f"{entry.name} from github.com/{entry.repo}@{entry.commit[:12]} {entry.path}, packed by gdn-harness"
    sol = Solution(entry.name, entry.definition, entry.author, spec, read_sources(root), description)
    return Solution.from_json(sol.to_json(), root)


def read_sources(root):
    """The sources at `root`: every file under a folder (paths relative to it), the `sources` of a Solution JSON,
    or one file by its name."""
    if root.is_file() and root.suffix == ".json":
        return Solution.load(root).sources
    if root.is_file():
        return [read_source(root, root.name)]
    sources = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        # As the starter-kit packer: no caches or compiled files. Unlike it, files that are not UTF-8 text (a
        # picture, a PDF next to the kernel) are left out rather than refused: an author's folder, not ours.
        if p.is_dir() or SKIP_PARTS & set(rel.parts) or p.suffix in SKIP_SUFFIXES:
            continue
        source = read_source(p, rel.as_posix())
        if source:
            sources.append(source)
    return sources


def read_source(p, rel):
    """SourceFile(rel, text), None for a file that is not UTF-8 text; a symbolic link is refused, as in a kit."""
    if p.is_symlink():
        raise DataError(p, "symbolic links are not packed")
    check_source_path(rel, p)
    try:
        return SourceFile(rel, p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        return None
