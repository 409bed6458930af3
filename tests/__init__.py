"""The core\x27s own tests."""
