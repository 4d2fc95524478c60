"""bench's library: the table of studies, the results table writer and its formatting helpers."""
