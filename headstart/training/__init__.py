"""Offline training tools: the proposal head's trainer, the EOU head's trainer and their data.

Never imported by a running pipeline (`tests/test_layout.py` checks that `llm/` does not import this
package); these modules may read the packaged bench prompts and the runtime `llm/` modules they train.
"""
