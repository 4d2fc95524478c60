"""A finished query's trace: its timeline and critical path, and its text forms (a table, a Gantt chart)."""
