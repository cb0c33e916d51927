"""The evaluation: inputs and stand-ins, the reference, correctness, timers, the job a child runs and the pool of
children, payloads and reference-latency caches, traces, the loop per workload and what the console shows."""
