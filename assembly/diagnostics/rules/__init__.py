"""The rule implementations, one module per family; the table is in ``diagnostics``."""
