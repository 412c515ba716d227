"""Claude's computer-use tool, forwarded to computer-mcp unchanged.

A plain agent loop beside computer-mcp: the Anthropic Messages API is given
the computer-use tool (`computer_20251124`) and the bash tool; each tool
call Claude makes goes to the server as it is (`computer` takes Anthropic's
actions, bash's command goes to `exec`), and the server's answer (text, and
the screenshot as an image) goes back as the tool result.

    pip install anthropic mcp
    ANTHROPIC_API_KEY=... python3 examples/anthropic_computer_use.py \
        --task "Write hello to /tmp/hello.txt" -- computer-mcp --kind desktop

With --replay FILE the model is a recorded transcript instead (CI runs it
so): its turns are the Messages API's own responses, validated as such.
"""

import asyncio
import json

import anthropic
from anthropic.types.beta import BetaMessage
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import loop_args

BETA = "computer-use-2025-11-24"
TOOLS = [
    {"type": "computer_20251124", "name": "computer",
     "display_width_px": 1280, "display_height_px": 800},
    {"type": "bash_20250124", "name": "bash"},
]


def recorded(path):
    """A stand-in for messages.create that answers with a transcript's turns."""
    turns = [BetaMessage.model_validate(t) for t in json.load(open(path))["turns"]]
    return lambda **_: turns.pop(0)


def blocks(result):
    """An MCP tool result as the content of an Anthropic tool_result."""
    out = []
    for c in result.content:
        if c.type == "text":
            out.append({"type": "text", "text": c.text})
        elif c.type == "image":
            out.append({"type": "image", "source": {
                "type": "base64", "media_type": c.mime_type, "data": c.data}})
    return out


async def forward(mcp, use):
    """One tool call of Claude's, sent to the server unchanged."""
    if use.name == "computer":
        return await mcp.call_tool("computer", use.input)
    if use.name == "bash":
        return await mcp.call_tool("exec", {"command": use.input["command"]})
    raise ValueError(f"no such tool: {use.name}")


async def main(args):
    create = (recorded(args.replay) if args.replay
              else anthropic.Anthropic().beta.messages.create)
    server = StdioServerParameters(command=args.server[0], args=args.server[1:])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as mcp:
            await mcp.initialize()
            messages = [{"role": "user", "content": args.task}]
            for _ in range(args.max_turns):
                msg = create(model=args.model, max_tokens=2048, tools=TOOLS,
                             messages=messages, betas=[BETA])
                messages.append({"role": "assistant", "content": [
                    b.model_dump(exclude_none=True) for b in msg.content]})
                uses = [b for b in msg.content if b.type == "tool_use"]
                if not uses:
                    print("".join(b.text for b in msg.content if b.type == "text"))
                    return
                results = []
                for use in uses:
                    r = await forward(mcp, use)
                    print(f"{use.name} {json.dumps(use.input)} -> "
                          f"{'error' if r.is_error else 'ok'}")
                    results.append({"type": "tool_result", "tool_use_id": use.id,
                                    "content": blocks(r), "is_error": bool(r.is_error)})
                messages.append({"role": "user", "content": results})
            raise SystemExit(f"no answer in {args.max_turns} turns")


if __name__ == "__main__":
    asyncio.run(main(loop_args.parse(__doc__, "claude-sonnet-4-5")))
