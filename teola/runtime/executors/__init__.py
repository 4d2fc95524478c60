"""Where engine instances run: in process (asyncio) or as Ray actors."""
