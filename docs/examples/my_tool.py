"""Register your own tool and ask for it: `python docs/examples/my_tool.py` (no model needed).

The matcher picks the call from the text, the registry validates its arguments against the function's
signature, and the run has a timeout; the spoken answer is what the session would say."""

import asyncio
import random

from headstart.clock import MonotonicClock
from headstart.tools import ToolRegistry
from headstart.tools.toolbox import Toolbox

registry = ToolRegistry()


@registry.tool(sentences=["roll a {sides} sided die", "roll a die with {sides} sides"])
def roll_die(sides: int) -> str:
    """Roll a die with `sides` sides."""
    return f"You rolled a {random.randint(1, sides)}."


async def main() -> None:
    box = Toolbox(MonotonicClock(), tools=registry)
    for text in ["Roll a 20 sided die.", "What is 17 times 23?", "Set a timer for ten minutes.",
                 "How long is left?", "What's the weather like?"]:
        call = box.route(text)  # matched and validated: nothing has run yet
        if call is None:
            print(f"{text!r:35} -> no tool: the LLM answers")
            continue
        outcome = await box.run(call)  # the tool runs here, with its timeout
        print(f"{text!r:35} -> {call.tool.name}({call.arguments}): {outcome.spoken}")
    box.close()  # the session's end: its running timers are cancelled (a log line each)


if __name__ == "__main__":
    asyncio.run(main())
