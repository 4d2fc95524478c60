"""Search engines: Postgres full-text search over a local corpus, and remote web-search APIs."""
