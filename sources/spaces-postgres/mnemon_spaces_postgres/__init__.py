"""PostgreSQL for mnemon's `spaces` Source; `.testing` starts a private server for tests."""
