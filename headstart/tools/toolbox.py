"""One session's tools: the built-in ones bound to its timers and the user's lists, plus any
registered ones; the matcher that picks a call for a final transcript; and the timeout every run has.

    toolbox = Toolbox(clock, lists=ListStore(tmp_path / "lists.sqlite3"), user="ana")
    call = toolbox.route("set a timer for ten minutes")   # ToolCall(timer_start, {"seconds": 600.0}); nothing ran
    toolbox.preview(call)                                  # "Timer set for ten minutes.": what it will say; nothing ran
    outcome = await toolbox.run(call)                      # the timer starts: "Timer set for ten minutes."
    toolbox.due()                                          # timers that fired since (each once)
    toolbox.close()                                        # the session ended: its timers are cancelled

`route` has no side effect (the session may call it for a held reply that is later dropped); only
`run` acts. Making a Toolbox parses the templates the first time in a process (~0.6 s); `warm_up`
does it, and loads the unit registry, ahead.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from headstart.clock import Clock
from headstart.tools.builtin import READ_ONLY, ToolContext, builtin_tools, check_arguments, predicted_answer
from headstart.tools.lists import ListStore
from headstart.tools.matcher import IntentMatcher
from headstart.tools.registry import (
    DEFAULT_TIMEOUT_S,
    ToolArgumentError,
    ToolCall,
    ToolOutcome,
    ToolRegistry,
    run_tool,
)
from headstart.tools.timers import Timer, TimerBook

# follow-ups that only mean a tool while there is a timer or alarm to mean (a reminder is cancelled by its name)
_NEEDS_A_TIMER = frozenset({"timer_status_short", "timer_cancel_short"})


class Toolbox:
    """See the module docstring.

    Args:
        clock: the session's clock (timers run on it).
        lists: where the lists are kept (default: `ListStore()` in the user's data folder).
        user: whose lists these are ("default" when the server knows no user).
        tools: registered tools (`ToolRegistry`) beside the built-in ones; one of the same name wins.
        now: the wall clock for the time, the date and alarms (tests pin it).
        timeout_s: the longest a built-in tool may run; a registered tool has its own `timeout_s`.
    """

    def __init__(self, clock: Clock, *, lists: ListStore | None = None, user: str = "default",
                 tools: ToolRegistry | None = None, now: Callable[[], dt.datetime] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.timers = TimerBook(clock)
        self.context = ToolContext(self.timers, lists if lists is not None else ListStore(), user)
        if now is not None:
            self.context.now = now
        self.registry = ToolRegistry()
        for tool in builtin_tools(self.context):
            self.registry.add(tool)
        self._builtin = frozenset(t.name for t in self.registry)
        for tool in tools or ():
            self.registry.add(tool)
            self._builtin -= {tool.name}
        self._timeout_s = timeout_s
        self.matcher = IntentMatcher(tuple(tools or ()))
        # parsed once per process: here (a session starting) rather than at its first final transcript
        self.matcher.load()

    def route(self, text: str) -> ToolCall | None:
        """The validated tool call `text` asks for, or None (no template matches, or none whose arguments
        fit its tool: the LLM answers). Runs nothing."""
        for match in self.matcher.matches(text):
            tool = self.registry.get(match.tool)
            if tool is None:
                continue
            if match.intent in _NEEDS_A_TIMER and not (self.timers.find(kind="timer") or self.timers.find(kind="alarm")):
                continue
            if match.intent == "reminder_when" and self.context.awaiting_when() is None:
                continue
            try:
                call = self.registry.call(match.tool, match.arguments)
                if match.tool in self._builtin:
                    check_arguments(match.tool, call.arguments)
            except ToolArgumentError:
                continue
            return call
        return None

    def preview(self, call: ToolCall) -> str | None:
        """The spoken answer `call` will most likely give, found without acting: a read-only built-in
        tool's own answer (it reads the clock, does arithmetic), an acting one's answer on success
        (`builtin.predicted_answer`); None for registered tools, the rest, or any failure. The session
        voices it while the reply is held; `run` still does the work, and its answer wins."""
        name = call.tool.name
        if name not in self._builtin:
            return None
        if name not in READ_ONLY:
            return predicted_answer(name, call.arguments)
        try:
            answer = call.tool.function(**call.arguments)
        except Exception:  # noqa: BLE001 - no preview; the run reports the failure
            return None
        return answer if isinstance(answer, str) else None

    async def run(self, call: ToolCall) -> ToolOutcome:
        """Run `call` with its timeout (`run_tool`): never raises for the tool's own failure."""
        timeout_s = self._timeout_s if call.tool.name in self._builtin else None
        return await run_tool(call, timeout_s)

    def due(self) -> list[Timer]:
        """Timers, alarms and reminders that fired (each returned once)."""
        return self.timers.due()

    def close(self) -> list[Timer]:
        """The session ended: its timers, alarms and reminders are cancelled with a log line each."""
        return self.timers.close()


def warm_up() -> None:
    """Load, once per process, what the first matches would otherwise load on the event loop: the
    built-in templates parsed by hassil (~0.6 s) and pint's unit registry (~1.6 s, for the first unit
    conversion request), both on a 2-core CPU. `Components.load` calls it when tools are on; a second
    call costs nothing. Reads only installed package data: nothing is downloaded."""
    from headstart.tools.units import unit_name

    IntentMatcher().load()
    unit_name("meters")
