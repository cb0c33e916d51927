# Front door: thin wrappers over the one CLI (`gdn-harness`, or `python -m harness`); `make help` lists them.
# Variables pass through: DEF (definition, repeatable as a space-separated list), SOLS (solutions), WORKLOADS,
# DEVICE, OUT, BASE, FROM, ARGS (any other option, e.g. ARGS="--no-resume --isolation process"); a target refuses
# one it has no use for.
# a comma in a message given to $(call ...) is written $(,): call splits its arguments on commas
, := ,
# A GPU host usually has torch already (the H200 image does, with no package index): use it as it is.
GPU_PY = if python3 -c "import torch" 2>/dev/null; then py=python3; else $(MAKE) venv || exit 1; py=.venv/bin/python; fi
# The targets that also run on a CPU: .venv once made, else a python3 that has torch, else .venv made now.
CPU_PY = if [ -f .venv/.installed ]; then py=.venv/bin/python; elif python3 -c "import torch" 2>/dev/null; then \
  py=python3; else $(MAKE) venv || exit 1; py=.venv/bin/python; fi
# stop with the message $(1) unless this host has an NVIDIA GPU (its device node, or nvidia-smi): checked before a
# venv of several GB is made for nothing
NEED_GPU = { test -e /dev/nvidiactl || test -e /dev/dxg || nvidia-smi -L >/dev/null 2>&1 \
  || { echo "$(strip $(1))" >&2; exit 2; }; }
CPU_HINT = on a CPU$(,) check a solution with: make check SOLS=path/to/kit DEVICE=cpu
# exit with the message $(1) unless torch sees a CUDA GPU
NEED_CUDA = $$py -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else '$(strip $(1))')"
SOLUTIONS = $(foreach s,$(SOLS),--solution $(s))
RUN_ARGS = $(foreach d,$(DEF),--definition $(d)) $(if $(WORKLOADS),--workloads $(WORKLOADS)) \
           $(if $(DEVICE),--device $(DEVICE)) $(if $(OUT),--out $(OUT)) $(ARGS)

# stop target $(1) when a variable it has no use for is given on the command line (it would be dropped in silence);
# $(2): the variables it takes
ONLY = $(foreach v,$(filter-out $(2),DEF SOLS WORKLOADS DEVICE OUT BASE ARGS FROM),$(if $(filter command line,\
  $(origin $(v))),echo "make $(1) takes no $(v) (it takes $(2))" >&2; exit 2;))
# package and tune take one folder (SOLS: a kit, or a folder of kits; default submission/)
ONE_FOLDER = $(if $(word 2,$(SOLS)),echo "make $(1): SOLS names one folder (a kit, or a folder of kits)" >&2; exit 2;)

.PHONY: help venv test test-gpu eval bench check compare public package tune clean-cache

help:
	@echo "make test      CPU test suite (installs what it needs into .venv; what CI runs)"
	@echo "make eval      on a GPU: ours + FlashInfer baseline (+ prefill ablation), all workloads -> results/<gpu>/"
	@echo "make check     SOLS=path/to/kit [DEF=..] [WORKLOADS=0-2] [DEVICE=cpu]: evaluate solutions"
	@echo "make compare   SOLS='ours baseline my-kit' [BASE=name] [DEF=..] [WORKLOADS=..] [OUT=dir]: one interleaved run"
	@echo "make bench     on a GPU: the harness benchmark (ours + baseline, fresh folder, wall time)"
	@echo "make public    on a GPU: fetch the public entries (FROM=dir of packed JSONs offline), run them beside ours"
	@echo "make package   [SOLS=kit or folder of kits] (default submission/) -> results/package/<definition>/solution.json"
	@echo "make tune      on a GPU: our launch tables again for this GPU -> the submission's tuned_tables.json"
	@echo "make test-gpu  GPU-marked tests (on a CUDA host)"

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
	@$(call NEED_GPU,make test-gpu: no NVIDIA GPU here (make test runs every test that is not GPU-marked)); $(GPU_PY); $(call NEED_CUDA,make test-gpu: no CUDA GPU here (make test runs every test that is not GPU-marked)) \
	  && $$py -m pytest -m gpu -q

eval:
	@$(call ONLY,eval,DEF WORKLOADS DEVICE OUT ARGS) $(call NEED_GPU,make eval times kernels on a CUDA GPU and this host has none; $(CPU_HINT)); $(GPU_PY); \
	  $$py -m harness full $(RUN_ARGS)

bench:
	@$(call ONLY,bench,DEF OUT ARGS) $(call NEED_GPU,make bench times the harness on a CUDA GPU and this host has \
	  none); $(GPU_PY); $$py -m harness bench $(foreach d,$(DEF),--definition $(d)) $(if $(OUT),--out $(OUT)) $(ARGS)

check:
	@$(call ONLY,check,SOLS DEF WORKLOADS DEVICE OUT ARGS) test -n "$(SOLS)" || { echo "usage: make check \
	  SOLS='path/to/kit ...' [DEF=..] [WORKLOADS=..] [DEVICE=cpu]" >&2; exit 2; }
	@$(if $(DEVICE),,$(call NEED_GPU,make check times on a CUDA GPU and this host has none: add DEVICE=cpu for a \
	  correctness check on the CPU);) $(CPU_PY); $$py -m harness eval $(SOLUTIONS) $(RUN_ARGS)

compare:
	@$(call ONLY,compare,SOLS BASE DEF WORKLOADS DEVICE OUT ARGS) test -n "$(SOLS)" || { echo "usage: make compare \
	  SOLS='ours baseline ...' [BASE=name] [DEF=..] [OUT=dir]" >&2; exit 2; }
	@$(if $(DEVICE),,$(call NEED_GPU,make compare times on a CUDA GPU and this host has none: add DEVICE=cpu to \
	  run the solutions side by side on the CPU (wall clock$(,) no speedups));) $(CPU_PY); \
	  $$py -m harness compare $(SOLUTIONS) $(foreach b,$(BASE),--base $(b)) $(RUN_ARGS)

# FROM: a folder of pre-packed JSONs (<definition>/<name>.json) where there is no network to clone from
public:
	@$(call ONLY,public,FROM SOLS DEF WORKLOADS DEVICE OUT ARGS) $(call NEED_GPU,make public: the entries are timed on a CUDA GPU$(,) none here \
	  (on a CPU: gdn-harness public fetch$(,) public list$(,) and eval --solution <a fetched JSON> --device cpu)); $(GPU_PY); $(call NEED_CUDA,make public: the entries are timed on a CUDA GPU$(,) none here \
	  (on a CPU: gdn-harness public fetch$(,) public list$(,) and eval --solution <a fetched JSON> --device cpu)) \
	  && { $$py -m harness public fetch $(if $(FROM),--from $(FROM)); $$py -m harness public run $(SOLUTIONS) $(RUN_ARGS); }


package:
	@$(call ONLY,package,SOLS OUT ARGS) $(call ONE_FOLDER,package) \
	  $(CPU_PY); $$py -m harness package $(if $(SOLS),--submission $(SOLS)) $(if $(OUT),--out $(OUT)) $(ARGS)

tune:
	@$(call ONLY,tune,SOLS DEF DEVICE ARGS) $(call ONE_FOLDER,tune) \
	  $(call NEED_GPU,make tune times our kernels on a CUDA GPU and this host has none); $(GPU_PY); \
	  $$py -m harness tune $(if $(SOLS),--submission $(SOLS)) $(foreach d,$(DEF),--definition $(d)) \
	  $(if $(DEVICE),--device $(DEVICE)) $(ARGS)

clean-cache:
	rm -rf .cache workloads/blob
