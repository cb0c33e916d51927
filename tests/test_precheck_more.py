"""More of the static pre-check (harness/build/precheck.py) and `make package`: torch's grad-mode decorators keep the
entry's signature (they wrap it with functools.wraps, and inspect.signature follows __wrapped__), so a decorated entry
with a wrong signature is refused before any child starts and before anything is packed, as an undecorated one is;
other decorators are still left to the build, and `make package` says that it did not check them; a native solution
that needs a CUDA GPU is refused on --device cpu, instead of failing its build with a compiler's message."""
import inspect
import shutil
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from harness.build.package import package, validate
from harness.build.precheck import static_problem
from harness.cli import main
from harness.data.dataset import Dataset
from harness.data.jsonio import DataError
from harness.data.solution import Solution
from harness.data.starter_kit import load_starter_kit
from tests.toy import make_toy_root, toy_solution

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "gdn_decode_qk4_v8_d128_k_last"
TOY = SimpleNamespace(inputs={"x": None, "y": None, "alpha": None}, outputs={"z": None})  # as toy_axpy: DPS takes 4
WRONG = ("Destination-passing style callable: expected 4 positional parameters (3 inputs + 1 outputs), but 'run' "
         "takes 3 required of 3 (the official build-time check; it gives COMPILE_ERROR)")

# (imports, decorator lines): each keeps the def's signature, so its wrong one is refused as an undecorated def's
KEEPING = {
    "no_grad_called": ("import torch", "@torch.no_grad()"),
    "no_grad_bare": ("import torch", "@torch.no_grad"),
    "inference_mode_called": ("import torch", "@torch.inference_mode()"),
    "inference_mode_off": ("import torch", "@torch.inference_mode(False)"),
    "inference_mode_by_keyword": ("import torch", "@torch.inference_mode(mode=True)"),
    "enable_grad": ("import torch", "@torch.enable_grad()"),
    "imported_name": ("from torch import no_grad", "@no_grad()"),
    "imported_name_bare_aliased": ("from torch import inference_mode as im", "@im"),
    "torch_aliased": ("import torch as th", "@th.no_grad()"),
    "through_autograd": ("import torch", "@torch.autograd.no_grad()"),
    "imported_from_autograd": ("from torch.autograd import enable_grad", "@enable_grad()"),
    "submodule_import_binds_torch": ("import torch.nn", "@torch.no_grad()"),
    "autograd_as_torch": ("import torch.autograd as torch", "@torch.no_grad()"),
    "two_of_them": ("import torch", "@torch.no_grad()\n@torch.enable_grad()"),
}

# decorators the source cannot vouch for: left to the build, as before
NOT_KNOWN = {
    "compile": ("import torch", "@torch.compile"),
    "jit_script": ("import torch", "@torch.jit.script"),
    "no_grad_with_an_argument": ("import torch", "@torch.no_grad(1)"),
    "inference_mode_with_a_name": ("import torch\nMODE = False", "@torch.inference_mode(MODE)"),
    "a_name_from_elsewhere": ("from functools import lru_cache as no_grad", "@no_grad()"),
    "torch_rebound": ("import torch\ntorch = object()", "@torch.no_grad()"),
    "torch_imported_in_a_try": ("try:\n    import torch\nexcept ImportError:\n    torch = None", "@torch.no_grad()"),
    "torch_not_imported": ("", "@torch.no_grad()"),
    "another_module_as_torch": ("import torch.nn as torch", "@torch.no_grad()"),
    "one_keeping_one_not": ("import torch, functools", "@torch.no_grad()\n@functools.lru_cache"),
    "global_torch": ("import torch\n\ndef f():\n    global torch\n    torch = None\n", "@torch.no_grad()"),
}


def _solution(name, imports, decorators, params="x, y, alpha", language="python"):
    body = f"{imports}\n\n\n{decorators}\ndef run({params}):\n    pass\n"
    return Solution.from_json(toy_solution(name, body, language=language), name)


@pytest.mark.parametrize("name", sorted(KEEPING))
def test_a_signature_keeping_decorator_is_seen_through(name):
    sol = _solution(name, *KEEPING[name])
    assert static_problem(sol, TOY) == WRONG
    with pytest.raises(DataError) as exc:
        validate(sol, TOY, "kit")
    assert exc.value.message == WRONG
    # and a right signature under it is accepted
    assert static_problem(_solution(name, *KEEPING[name], params="x, y, alpha, z"), TOY) is None


@pytest.mark.parametrize("name", sorted(NOT_KNOWN))
def test_other_decorators_are_still_left_to_the_build(name):
    sol = _solution(name, *NOT_KNOWN[name])
    assert static_problem(sol, TOY) is None
    assert validate(sol, TOY, "kit").startswith("the signature of entry point 'run' was not checked: it is decorated")


def test_what_the_list_says_is_what_torch_does():
    """The decorators taken as transparent give inspect.signature of the def, as FIB's build-time check reads it."""
    def run(x, y, alpha, z=None) -> torch.Tensor:
        pass
    wrapped = [torch.no_grad()(run), torch.no_grad(run), torch.inference_mode()(run), torch.inference_mode(run),
               torch.inference_mode(False)(run), torch.enable_grad()(run), torch.enable_grad(run),
               torch.autograd.no_grad()(run), torch.autograd.grad_mode.inference_mode()(run)]
    assert {str(inspect.signature(w)) for w in wrapped} == {"(x, y, alpha, z=None) -> torch.Tensor"}


def _example_kit(root, signature):
    kit = root / "decode"
    shutil.copytree(EXAMPLE, kit, ignore=shutil.ignore_patterns("__pycache__"))
    main_py = kit / "solution" / "python" / "main.py"
    old = "def run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):"
    assert old in main_py.read_text()
    main_py.write_text(main_py.read_text().replace(old, f"def run({signature}):"))
    return kit


EXAMPLE_WRONG = ("Destination-passing style callable: expected 11 positional parameters (9 inputs + 2 outputs), but "
                 "'run' takes 10 required of 10 (the official build-time check; it gives COMPILE_ERROR)")


def test_a_copied_example_with_a_broken_signature_is_refused_before_any_child(tmp_path):
    ds = Dataset()
    kit = _example_kit(tmp_path / "sub", "q, k, v, state, A_log, a, dt_bias, b, scale, output")
    sol = load_starter_kit(kit)
    assert static_problem(sol, ds.definition(sol.definition)) == EXAMPLE_WRONG
    with pytest.raises(DataError) as exc:
        package(tmp_path / "sub", tmp_path / "out", ds)
    assert exc.value.message == EXAMPLE_WRONG and not (tmp_path / "out").exists()


def test_the_example_kit_packs_without_a_note_on_its_signature(tmp_path, capsys):
    assert main(["package", "--submission", str(EXAMPLE), "--out", str(tmp_path / "out")]) == 0
    assert "was not checked" not in capsys.readouterr().out


def test_package_says_where_it_did_not_check_the_signature(tmp_path, capsys):
    root = make_toy_root(tmp_path / "toy")
    kit = tmp_path / "sub" / "kit"
    (kit / "solution" / "python").mkdir(parents=True)
    (kit / "config.toml").write_text('[solution]\nname = "kit"\ndefinition = "toy_axpy"\nauthor = "kitter"\n'
                                     '[build]\nlanguage = "python"\nentry_point = "main.py::run"\n')
    (kit / "solution" / "python" / "main.py").write_text(
        "import functools\n\n\n@functools.lru_cache\ndef run(x, y, alpha):\n    pass\n")
    assert main(["package", "--submission", str(kit), "--out", str(tmp_path / "out"), "--dataset", str(root)]) == 0
    assert ("  note: the signature of entry point 'run' was not checked: it is decorated with @functools.lru_cache, "
            "which may change it; the build checks the object bound to the name (a wrong one: COMPILE_ERROR on "
            "every workload)\n") in capsys.readouterr().out
    assert (tmp_path / "out" / "toy_axpy" / "solution.json").exists()


@pytest.mark.parametrize("body,why", [
    ("from .impl import run\n", "'run' is bound by an import, not a def"),
    ("def run(x):\n    pass\n\nrun = (lambda f: f)(run)\n", "'run' is bound 2 times at module level"),
    ("class run:\n    pass\n", "'run' is bound by a class, not a def"),
    ("from os import *\n\ndef run(x):\n    pass\n",
     "the module can bind names its source does not show (a star import, a module __getattr__, globals(), vars(), "
     "exec or setattr)"),
])
def test_validate_says_why_it_left_a_signature_to_the_build(body, why):
    sol = Solution.from_json(toy_solution("s", body, extra_sources=[{"path": "impl.py", "content": "run = 1\n"}]),
                             "s")
    assert validate(sol, TOY, "kit") == (f"the signature of entry point 'run' was not checked: {why}; the build "
                                         "checks the object bound to the name (a wrong one: COMPILE_ERROR on every "
                                         "workload)")


def _native(language, sources):
    sol = toy_solution("native", "", language=language, entry=f"{sources[0]}::run")
    sol["sources"] = [{"path": p, "content": "// made by the test\n"} for p in sources]
    return Solution.from_json(sol, "native")


def test_a_cuda_solution_is_refused_on_the_cpu_with_the_reason():
    sol = _native("cuda", ["kernel.cu", "binding.cpp"])
    assert static_problem(sol, TOY, device="cpu") == (
        "a cuda solution needs a CUDA GPU: --device cpu cannot build or run it")
    assert static_problem(sol, TOY, device="cuda") is None and static_problem(sol, TOY, device="cuda:1") is None
    assert static_problem(sol, TOY) is None         # no device given: as before, the compiler says


def test_a_cpp_solution_is_refused_on_the_cpu_only_with_cuda_sources():
    assert static_problem(_native("cpp", ["main.cpp", "k.cu", "b.cu"]), TOY, device="cpu") == (
        "a cpp solution with CUDA sources (k.cu, b.cu) needs a CUDA GPU: --device cpu cannot build or run it")
    assert static_problem(_native("cpp", ["main.cpp"]), TOY, device="cpu") is None   # host C++ may build here
    assert static_problem(_native("cpp", ["main.cpp", "k.cu"]), TOY, device="cuda") is None


def test_a_python_solution_is_not_refused_for_the_device():
    sol = Solution.from_json(toy_solution("py", "def run(x, y, alpha, z):\n    pass\n"), "py")
    assert static_problem(sol, TOY, device="cpu") is None


def test_a_missing_module_names_its_pip_package_where_the_names_differ(monkeypatch):
    import harness.build.imports as imports
    monkeypatch.setattr(imports, "importable", lambda top: top not in {"flashinfer", "fla", "cutlass_magic"})
    body = "import flashinfer\nimport fla\nimport cutlass_magic\n\ndef run(x, y, alpha, z):\n    pass\n"
    problem = static_problem(Solution.from_json(toy_solution("m", body), "m"), TOY)
    assert problem.startswith("imports flashinfer (pip package flashinfer-python, or pip install '.[gpu]'), fla "
                              "(pip package flash-linear-attention), cutlass_magic, which cannot be imported")
    assert "(install them, or evaluate on a machine that has them)" in problem
    assert problem.endswith("; FlashInfer's GDN kernels run on a CUDA GPU only")   # installing it on a CPU won't do
