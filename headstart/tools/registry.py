"""Tools as typed Python functions: the signature is the schema, the call is validated before it runs,
and every run has a timeout.

    registry = ToolRegistry()

    @registry.tool(sentences=["roll a {sides} sided die"])
    def roll_die(sides: int) -> str:
        return f"You rolled a {random.randint(1, sides)}."

    call = registry.call("roll_die", {"sides": "6"})      # validated: ToolCall(roll_die, {"sides": 6})
    outcome = await run_tool(call, timeout_s=2.0)          # ToolOutcome(spoken="You rolled a 4.", ok=True)

A tool returns its spoken answer (str); any other value is spoken through the tool's `answer` template
(`answer.format(result=value, **arguments)`). A bad argument, a tool that raises, or one that outlasts
its timeout gives a short spoken apology (`APOLOGY`), `ok=False` and the reason in `error`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, get_type_hints

log = logging.getLogger(__name__)

APOLOGY = "Sorry, I couldn't do that."
DEFAULT_TIMEOUT_S = 2.0
_TYPES = (str, int, float, bool)


class ToolArgumentError(ValueError):
    """A tool call whose arguments do not fit the tool's signature (missing, unknown, wrong type)."""


@dataclass(frozen=True, slots=True, eq=False)  # compared and hashed by identity (the matcher caches per tool set)
class Tool:
    """A registered tool.

    Attributes:
        name: how calls and events name it.
        function: the Python function run with the validated arguments (on a worker thread).
        parameters: argument name -> type (str, int, float or bool), from the signature.
        required: the parameters without a default.
        sentences: hassil templates that call it, one `{parameter}` slot per argument.
        answer: a format string for a non-str result (`{result}` and the arguments), or None.
        timeout_s: seconds a run may take.
        description: its docstring's first line.
    """

    name: str
    function: Callable[..., Any]
    parameters: dict[str, type]
    required: frozenset[str]
    sentences: tuple[str, ...] = ()
    answer: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    description: str = ""

    def schema(self) -> dict[str, Any]:
        """The tool as a JSON-schema-like dict (name, description, parameters with types, required)."""
        names = {str: "string", int: "integer", float: "number", bool: "boolean"}
        return {"name": self.name, "description": self.description,
                "parameters": {"type": "object",
                               "properties": {k: {"type": names[t]} for k, t in self.parameters.items()},
                               "required": sorted(self.required)}}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A validated call: `arguments` fit `tool.parameters`. Making one runs nothing."""

    tool: Tool
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a run gave: the spoken answer, whether the tool did its job, why not ("" when ok), and what
    the function returned (`value`: None when it failed; the spoken answer itself for a tool that
    returns one)."""

    call: ToolCall
    spoken: str
    ok: bool
    error: str = ""
    value: Any = None


def make_tool(function: Callable[..., Any], *, name: str | None = None, sentences: list[str] | tuple[str, ...] = (),
              answer: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> Tool:
    """A `Tool` from a typed function.

    Raises:
        TypeError: a parameter without an annotation, of a type other than str/int/float/bool, or
            `*args`/`**kwargs`.
    """
    hints = get_type_hints(function)
    parameters: dict[str, type] = {}
    required = set()
    for p in inspect.signature(function).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"tool {function.__name__}: *args and **kwargs are not allowed")
        kind = hints.get(p.name)
        if kind not in _TYPES:
            raise TypeError(f"tool {function.__name__}: parameter {p.name!r} needs a str, int, float or bool annotation")
        parameters[p.name] = kind
        if p.default is p.empty:
            required.add(p.name)
    doc = (inspect.getdoc(function) or "").strip().splitlines()
    return Tool(name or function.__name__, function, parameters, frozenset(required), tuple(sentences), answer,
                timeout_s, doc[0] if doc else "")


def validate(tool: Tool, arguments: dict[str, Any]) -> ToolCall:
    """The call of `tool` with `arguments` coerced to its parameter types ("6" -> 6 for an int).

    Raises:
        ToolArgumentError: a missing or unknown argument, or a value that is not of (or convertible to)
            the parameter's type.
    """
    from headstart.tools.numbers import parse_number

    unknown = set(arguments) - set(tool.parameters)
    if unknown:
        raise ToolArgumentError(f"{tool.name}: unknown arguments {sorted(unknown)}")
    missing = tool.required - set(arguments)
    if missing:
        raise ToolArgumentError(f"{tool.name}: missing arguments {sorted(missing)}")
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        kind = tool.parameters[key]
        if kind is bool:
            if not isinstance(value, bool):
                raise ToolArgumentError(f"{tool.name}: {key} must be true or false")
            out[key] = value
        elif kind in (int, float):
            number = value if isinstance(value, int | float) and not isinstance(value, bool) else \
                parse_number(str(value))
            if number is None or (kind is int and float(number) != int(number)):
                raise ToolArgumentError(f"{tool.name}: {key} must be {'a whole number' if kind is int else 'a number'}")
            out[key] = kind(number)
        else:
            text = str(value).strip()
            if not text:
                raise ToolArgumentError(f"{tool.name}: {key} is empty")
            out[key] = text
    return ToolCall(tool, out)


class ToolRegistry:
    """Tools by name (see the module docstring). Registering runs nothing."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def add(self, tool: Tool) -> Tool:
        """Register `tool` (replacing one of the same name)."""
        self._tools[tool.name] = tool
        return tool

    def register(self, function: Callable[..., Any], **options: Any) -> Tool:
        """Register a typed function (`make_tool`'s options: name, sentences, answer, timeout_s)."""
        return self.add(make_tool(function, **options))

    def tool(self, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """`@registry.tool(sentences=[...])`: register the function, return it unchanged."""
        def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
            self.register(function, **options)
            return function
        return decorate

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __iter__(self):
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> ToolCall:
        """A validated call of tool `name`.

        Raises:
            ToolArgumentError: no such tool, or arguments that do not fit it.
        """
        tool = self._tools.get(name)
        if tool is None:
            raise ToolArgumentError(f"no tool named {name!r}")
        return validate(tool, arguments or {})


async def run_tool(call: ToolCall, timeout_s: float | None = None) -> ToolOutcome:
    """Run a validated call on a worker thread, at most `timeout_s` (default: the tool's) seconds.
    Never raises for the tool's own failure: a raise or a timeout gives `APOLOGY`, `ok=False`, the
    reason in `error`, and a log line. (A timed-out function's thread is left to finish on its own.)"""
    tool = call.tool
    limit_s = tool.timeout_s if timeout_s is None else timeout_s
    loop = asyncio.get_running_loop()
    try:
        result = await asyncio.wait_for(loop.run_in_executor(None, lambda: tool.function(**call.arguments)), limit_s)
    except TimeoutError:
        log.warning("tool %s timed out after %.1f s", tool.name, limit_s)
        return ToolOutcome(call, APOLOGY, False, f"tool {tool.name} timed out after {limit_s:g} s")
    except Exception as exc:  # noqa: BLE001 - a tool's failure is spoken, logged and reported; the session goes on
        log.warning("tool %s failed: %s: %s", tool.name, type(exc).__name__, exc)
        return ToolOutcome(call, APOLOGY, False, f"tool {tool.name} failed: {type(exc).__name__}: {exc}")
    if isinstance(result, str):
        return ToolOutcome(call, result, True, value=result)
    if tool.answer is not None:
        return ToolOutcome(call, tool.answer.format(result=result, **call.arguments), True, value=result)
    return ToolOutcome(call, f"{result}.", True, value=result)
