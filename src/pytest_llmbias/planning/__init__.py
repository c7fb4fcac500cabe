"""Planning and collection: which calls a session needs, and running them (pipelined) into the store."""
