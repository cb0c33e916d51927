# Front door. `make test` (CPU, what CI runs) and `make eval` (GPU) are the two commands users need.
PY ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
GPU_SLUG ?= $(shell $(PY) -c "import torch; print(torch.cuda.get_device_name().split()[-1].lower() if torch.cuda.is_available() else 'cpu')" 2>/dev/null)
OUT ?= results/$(GPU_SLUG)

.PHONY: help venv test test-gpu eval package compare clean-cache

help:
	@echo "make test      CPU test suite (installs what it needs into .venv)"
	@echo "make test-gpu  GPU-marked tests (on a CUDA host)"
	@echo "make eval      full evaluation on a GPU: ours + FlashInfer baseline + reference -> $(OUT)/"

.venv/.installed: pyproject.toml
	python3 -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q "torch==2.13.0" "triton==3.6.0"
	.venv/bin/pip install -q -e ".[test]"
	touch $@

venv: .venv/.installed

test: .venv/.installed
	.venv/bin/python -m pytest -m "not gpu" -q

test-gpu:
	python3 -m pytest -m gpu -q

eval:
	$(PY) -m harness.make_eval --out $(OUT)

clean-cache:
	rm -rf .cache workloads/blob

package:
	$(PY) -m harness.package --out $(or $(PACKAGE_OUT),results/package)
