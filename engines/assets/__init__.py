"""What engines load, prepared from pip packages (never a model hub at run time): models, data sets,
and the paths of the cache that holds them."""
