"""Efficiency over time: GPU-seconds allocated, busy, effective and lost by cause, per GPU and owner."""
