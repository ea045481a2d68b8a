"""Local tools the assistant can use: time and date, timers and alarms, lists, a calculator, unit
conversion, and tools you register (docs/tools.md). A deterministic intent matcher picks the call; a
held reply never runs one (headstart/session/reply.py runs it once the end of turn releases the reply).
This layer imports only the kernel and the models layer."""

from headstart.tools.registry import (
    APOLOGY,
    Tool,
    ToolArgumentError,
    ToolCall,
    ToolOutcome,
    ToolRegistry,
    make_tool,
    run_tool,
)

__all__ = ["APOLOGY", "Tool", "ToolArgumentError", "ToolCall", "ToolOutcome", "ToolRegistry", "make_tool",
           "run_tool"]
