"""PostgreSQL + pgvector: the embedded server, connection pools and the vector store."""
