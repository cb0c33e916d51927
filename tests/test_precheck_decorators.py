"""The static pre-check (and `make package`) judges an entry point's signature only where the source says it: the
name's one module-level binding is a def without decorators (or under torch's grad modes only, which keep it: see
tests/test_precheck_more.py). FIB checks inspect.signature of the object the import
leaves bound to the name, so a decorated entry (a wrapper taking *args, a jit-like object) or a rebound name is left
to the build-time check in the child, which sees that object; an undecorated def with a wrong signature is still
refused before any child starts, with the official message."""
import textwrap
from types import SimpleNamespace

import pytest

from harness.build import builders
from harness.build.package import validate
from harness.build.precheck import static_problem
from harness.data.dataset import Dataset
from harness.data.solution import Solution
from harness.eval.child import TimingConfig
from harness.eval.loop import evaluate
from harness.eval.options import EvalOptions
from tests.toy import make_toy_root, toy_solution

TOY = SimpleNamespace(inputs={"x": None, "y": None, "alpha": None}, outputs={"z": None})  # as toy_axpy: DPS takes 4
WRONG = ("Destination-passing style callable: expected 4 positional parameters (3 inputs + 1 outputs), but 'run' "
         "takes 3 required of 3 (the official build-time check; it gives COMPILE_ERROR)")

# A decorator whose wrapper takes *args and passes a workspace first, without functools.wraps: the def takes 5,
# the object FIB binds (the wrapper) takes any number.
INJECTS = """
WORKSPACE = 0.0


def with_workspace(fn):
    def wrapper(*args, **kwargs):
        return fn(WORKSPACE, *args, **kwargs)
    return wrapper


@with_workspace
def run(ws, x, y, alpha, z):
    z.copy_(x + alpha * y + ws)
"""

# A triton.jit-like decorator: the name is bound to an object whose __call__ takes *args.
LAUNCHER = """
class Launcher:
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args[:3])


def launcher(fn):
    return Launcher(fn)


@launcher
def run(x, y, alpha):
    pass
"""

LEFT_TO_THE_BUILD = {
    "decorated_wrapper_takes_args": INJECTS,
    "jit_like_object": LAUNCHER,
    "decorated_by_attribute": "import functools\n\n@functools.lru_cache\ndef run(x, y, alpha):\n    pass\n",
    "rebound_after_the_def": "def run(ws, x, y, alpha, z):\n    pass\n\nrun = (lambda f: lambda *a: f(0, *a))(run)\n",
    "defined_twice": "import torch\nif torch.__version__:\n    def run(x, y, alpha, z):\n        pass\n"
                     "else:\n    def run(x):\n        pass\n",
    "a_class": "class run:\n    def __init__(self, x, y, alpha, z, w):\n        pass\n",
    "bound_in_globals": "def run(x):\n    pass\n\ndef _run(x, y, alpha, z):\n    pass\n\nglobals()['run'] = _run\n",
}


def _solution(name, body, extra_sources=()):
    return Solution.from_json(toy_solution(name, textwrap.dedent(body), extra_sources=extra_sources), name)


@pytest.mark.parametrize("name", sorted(LEFT_TO_THE_BUILD))
def test_a_decorated_or_rebound_entry_is_not_judged_from_its_source(name):
    sol = _solution(name, LEFT_TO_THE_BUILD[name])
    assert static_problem(sol, TOY) is None
    validate(sol, TOY, "kit")                       # `make package` leaves it to the build as well


def test_an_undecorated_entry_with_a_wrong_signature_is_still_refused_with_the_official_message():
    sol = _solution("wrong", "def run(x, y, alpha):\n    pass\n")
    assert static_problem(sol, TOY) == WRONG


def test_a_single_def_inside_an_if_is_still_judged():
    sol = _solution("wrong_in_if", "import torch\nif torch.__version__:\n    def run(x, y, alpha):\n        pass\n")
    assert static_problem(sol, TOY) == WRONG


def test_an_entry_bound_by_an_import_is_left_to_the_build_when_packing_too():
    sol = _solution("imported", "from .impl import run\n",
                    extra_sources=[{"path": "impl.py", "content": "def run(x, y, alpha, z):\n    pass\n"}])
    assert static_problem(sol, TOY) is None
    validate(sol, TOY, "kit")


def test_an_entry_that_is_not_bound_is_still_refused():
    sol = _solution("absent", "@staticmethod\ndef other(x, y, alpha, z):\n    pass\n")
    assert static_problem(sol, TOY) == "entry point 'run' is not defined in main.py (it defines: other)"


def test_the_build_time_check_sees_the_decorated_object(tmp_path, clean_imports):
    # the *args wrapper binds 4 positional arguments: FIB accepts it
    assert builders.check_signature(builders.build(_solution("injects", INJECTS), tmp_path), 3, 1, dps=True) is None
    # functools.wraps makes inspect.signature follow __wrapped__ to the def: FIB refuses it at build time, and so
    # does the child (the pre-check having left it alone)
    wrapped = INJECTS.replace("def with_workspace(fn):\n", "def with_workspace(fn):\n    @functools.wraps(fn)\n")
    fn = builders.build(_solution("wraps", "import functools\n" + wrapped), tmp_path)
    assert builders.check_signature(fn, 3, 1, dps=True).startswith(
        "Destination-passing style callable: expected 4 positional parameters, but signature '(ws, x, y, alpha, z)' "
        "is incompatible")


def test_a_decorated_entry_runs_and_passes_end_to_end(tmp_path):
    ds = Dataset(make_toy_root(tmp_path / "toy"))
    definition = ds.definition("toy_axpy")
    workloads = [w for w in ds.workloads(definition) if w.uuid == "w-random"]
    opts = EvalOptions(device="cpu", out_dir=tmp_path / "out", timing=TimingConfig(0, 1, 1), show_progress=False,
                       profile_baseline=False, reference_cache=tmp_path / "ref.json")
    (result,) = evaluate(ds, definition, workloads, [_solution("injects", INJECTS)], opts)
    assert result.trace.evaluation.status.value == "PASSED", result.trace.evaluation.log[-2000:]
