"""A tiny dataset root (one definition, three workloads) for testing the harness fast."""
import json
import textwrap
from pathlib import Path

import torch
from safetensors.torch import save_file

TOY_DEF = {
    "name": "toy_axpy", "op_type": "toy", "tags": [], "description": "z = x + alpha * y",
    "axes": {"n": {"type": "var"}, "two": {"type": "const", "value": 2}},
    "constraints": ["n > 0"],
    "inputs": {"x": {"shape": ["n", "two"], "dtype": "float32"}, "y": {"shape": ["n", "two"], "dtype": "float32"},
               "alpha": {"shape": None, "dtype": "float32"}},
    "outputs": {"z": {"shape": ["n", "two"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x, y, alpha):\n    return x + alpha * y\n",
}


def make_toy_root(root):
    root = Path(root)
    (root / "definitions" / "toy").mkdir(parents=True)
    (root / "definitions" / "toy" / "toy_axpy.json").write_text(json.dumps(TOY_DEF))
    blob = root / "blob" / "toy" / "real.safetensors"
    blob.parent.mkdir(parents=True)
    save_file({"x": torch.arange(8, dtype=torch.float32).reshape(4, 2),
               "y": torch.ones(4, 2, dtype=torch.float32)}, str(blob))
    rows = [
        {"uuid": "w-random", "axes": {"n": 16}, "inputs": {"x": {"type": "random"}, "y": {"type": "random"},
                                                        "alpha": {"type": "scalar", "value": 0.5}}},
        {"uuid": "w-blob", "axes": {"n": 4}, "inputs": {
            "x": {"type": "safetensors", "path": "./blob/toy/real.safetensors", "tensor_key": "x"},
            "y": {"type": "safetensors", "path": "./blob/toy/real.safetensors", "tensor_key": "y"},
            "alpha": {"type": "scalar", "value": 2.0}}},
        {"uuid": "w-standin", "axes": {"n": 8}, "inputs": {
            "x": {"type": "safetensors", "path": "./blob/toy/missing.safetensors", "tensor_key": "x"},
            "y": {"type": "safetensors", "path": "./blob/toy/missing.safetensors", "tensor_key": "y"},
            "alpha": {"type": "scalar", "value": 1.0}}},
    ]
    (root / "workloads" / "toy").mkdir(parents=True)
    (root / "workloads" / "toy" / "toy_axpy.jsonl").write_text(
        "".join(json.dumps({"definition": "toy_axpy", "solution": None, "workload": r, "evaluation": None}) + "\n"
                for r in rows))
    (root / "solutions").mkdir()
    return root


def toy_solution(name, body, dps=True, language="python", entry="main.py::run", extra_sources=()):
    """A solution JSON dict whose main.py is `body` (dedented)."""
    sources = [{"path": "main.py", "content": textwrap.dedent(body)}, *extra_sources]
    return {"name": name, "definition": "toy_axpy", "author": "tester",
            "spec": {"language": language, "target_hardware": ["cpu"], "entry_point": entry, "dependencies": [],
                     "destination_passing_style": dps, "binding": None},
            "sources": sources}
