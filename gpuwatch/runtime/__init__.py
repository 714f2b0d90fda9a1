"""Composition: which sources to open for a command, given its options and this machine."""
