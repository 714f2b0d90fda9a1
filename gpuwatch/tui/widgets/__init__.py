"""The dashboard's widgets, one module each."""
