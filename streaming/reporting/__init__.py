"""Reading the tables back: SQL views over the Delta tables and the per-group HTML report."""
