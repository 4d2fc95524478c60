"""Template -> primitive graph: decomposition of each component (`components/`), chunking, template
validation, configuration schemas and the cache of optimized graphs."""
