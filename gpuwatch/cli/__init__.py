"""The command line: composition root that wires sources, sampler and consumers together."""
