# Front door. `make test` (CPU, what CI runs) and `make eval` (GPU) are the two commands users need.
PY ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)

.PHONY: help venv test test-gpu eval bench compare package clean-cache

help:
	@echo "make test      CPU test suite (installs what it needs into .venv)"
	@echo "make test-gpu  GPU-marked tests (on a CUDA host)"
	@echo "make eval      full evaluation on a GPU: ours + FlashInfer baseline + reference -> results/<gpu>/"
	@echo "make bench     the harness benchmark on a GPU: ours + baseline, all workloads, cached reference latencies"
	@echo "make compare  DEF=<definition> SOLS='ours baseline my.json' [BASE=name] [OUT=dir]: one interleaved run"
	@echo "make package   submission/ -> results/package/<definition>/solution.json"

.venv/.installed: pyproject.toml
	python3 -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q "torch==2.13.0" "triton==3.6.0"
	.venv/bin/pip install -q -e ".[test]"
	touch $@

venv: .venv/.installed

# every core (pytest-xdist); worksteal, since a few interpreter tests take minutes each
test: .venv/.installed
	.venv/bin/python -m pytest -m "not gpu" -q -n auto --dist worksteal

test-gpu:
	python3 -m pytest -m gpu -q

# A GPU host usually has torch already (the H200 image does, with no package index): use it as it is.
# Elsewhere build the venv first; make_eval then installs the GPU packages it lacks, or names them.
GPU_PY = if python3 -c "import torch" 2>/dev/null; then py=python3; else $(MAKE) venv && py=.venv/bin/python; fi
eval:
	@$(GPU_PY); \
	$$py -m harness.make_eval $(if $(OUT),--out $(OUT)) $(if $(GPUS),--gpus $(GPUS))

# The harness benchmark (target: under 10 minutes): a fresh full run of ours + the baseline with reference
# outputs recomputed and reference latencies only looked up; recorded in results/<gpu>/bench/runs.jsonl.
bench:
	@$(GPU_PY); \
	$$py -m harness.make_eval --bench

# Several solutions in one run (same inputs, timer, GPU), ratios to BASE (default: the first).
compare:
	@test -n "$(DEF)" -a -n "$(SOLS)" || { echo "usage: make compare DEF=<definition> SOLS='ours baseline ...' [BASE=name] [OUT=dir]"; exit 2; }
	$(PY) -m harness compare --definition $(DEF) $(SOLS) $(if $(BASE),--base $(BASE)) --out $(or $(OUT),results/compare)

clean-cache:
	rm -rf .cache workloads/blob

package:
	$(PY) -m harness.package --out $(or $(PACKAGE_OUT),results/package)
