"""Programs: graphs that write in place, take views and run for several steps."""
