"""The data model, as FlashInfer-Bench's JSON has it: definitions, workloads, solutions, traces, a dataset root,
the starter-kit layout, and what a user names as a solution."""
