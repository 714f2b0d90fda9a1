"""The reference inference workload: the incident's service, stage by stage (naive -> workers -> batched ->
compiled -> bf16), with its load generator. ``gpuwatch workload`` runs a stage.

torch is optional: ``gpuwatch.workload.config`` and the CLI work without it; ``run.run_stage`` imports it
when a stage runs.
"""
