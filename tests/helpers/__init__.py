"""What several test modules share: helpers, constants and fixtures, one module per subject (tests/README.md).
A test module imports from here, never from another ``test_*.py`` module (tests/unit/test_test_layout.py)."""
