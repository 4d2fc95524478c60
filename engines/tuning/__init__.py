"""Engine settings chosen for this machine, above the adapters they configure: defaults for the
hardware found at start, settings measured by `teola tune`, and `teola setup` / `teola doctor`."""
