"""gpuwatch validate: run the reference workload stage by stage under the live sampler and tabulate it."""
