"""Shared pytest set-up."""

# CPython 3.11.7 can raise a spurious "SystemError: AST constructor recursion depth mismatch" when an
# ast.parse (pytest's assertion rewriting of a plugin imported late, e.g. hypothesis' at the terminal
# summary) overlaps with work on other threads (gh-106905, fixed in 3.11.8). Importing the plugin's
# package here, before any test starts a thread, keeps that parse out of the threaded part of the run.
import hypothesis  # noqa: F401
