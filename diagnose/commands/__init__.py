"""One module per command; the CLI module only parses options and calls these."""
