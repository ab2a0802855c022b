"""Shared builders, harnesses and hand-decoded frames of the test suite (no tests here)."""
