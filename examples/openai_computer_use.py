"""OpenAI's computer tool, forwarded to computer-mcp unchanged.

A plain agent loop beside computer-mcp: the Responses API is given the
computer tool and the shell tool; each `computer_call`'s actions go to the
server's `input` tool as they are (it takes OpenAI's actions in a batch) and
come back with a screenshot; each `shell_call`'s commands go to `exec`.

    pip install openai mcp
    OPENAI_API_KEY=... python3 examples/openai_computer_use.py \
        --task "Write hello to /tmp/hello.txt" -- computer-mcp --kind desktop

With --replay FILE the model is a recorded transcript instead (CI runs it
so): its turns are the Responses API's own responses, validated as such.
"""

import asyncio
import json

import openai
from openai.types.responses import Response
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import loop_args

TOOLS = [
    {"type": "computer_use_preview", "display_width": 1280, "display_height": 800,
     "environment": "linux"},
    {"type": "shell"},
]


def recorded(path):
    """A stand-in for responses.create that answers with a transcript's turns."""
    turns = [Response.model_validate(t) for t in json.load(open(path))["turns"]]
    return lambda **_: turns.pop(0)


def screenshot_of(result):
    """The image of an MCP tool result, as a data URL."""
    for c in result.content:
        if c.type == "image":
            return f"data:{c.mime_type};base64,{c.data}"
    return None


async def forward(mcp, item):
    """One call of the model's, sent to the server; its output item."""
    if item.type == "computer_call":
        actions = item.actions or [item.action]
        r = await mcp.call_tool("input", {"actions": [
            a.model_dump(exclude_none=True) for a in actions]})
        shot = screenshot_of(r)
        if shot is None:
            shot = screenshot_of(await mcp.call_tool("screenshot", {}))
        return r, {"type": "computer_call_output", "call_id": item.call_id,
                   "output": {"type": "computer_screenshot", "image_url": shot}}
    if item.type == "shell_call":
        outputs = []
        for command in item.action.commands:
            r = await mcp.call_tool("exec", {"command": command})
            s = r.structured_content or {}
            outputs.append({"stdout": s.get("stdout", ""), "stderr": s.get("stderr", ""),
                            "outcome": {"type": "exit", "exit_code": s.get("exit_code", 1)}})
        return r, {"type": "shell_call_output", "call_id": item.call_id, "output": outputs}
    raise ValueError(f"no such call: {item.type}")


async def main(args):
    create = recorded(args.replay) if args.replay else openai.OpenAI().responses.create
    server = StdioServerParameters(command=args.server[0], args=args.server[1:])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as mcp:
            await mcp.initialize()
            previous, given = None, [{"role": "user", "content": args.task}]
            for _ in range(args.max_turns):
                resp = create(model=args.model, tools=TOOLS, input=given,
                              previous_response_id=previous, truncation="auto")
                calls = [i for i in resp.output
                         if i.type in ("computer_call", "shell_call")]
                if not calls:
                    print(resp.output_text)
                    return
                given = []
                for item in calls:
                    r, out = await forward(mcp, item)
                    print(f"{item.type} -> {'error' if r.is_error else 'ok'}")
                    given.append(out)
                previous = resp.id
            raise SystemExit(f"no answer in {args.max_turns} turns")


if __name__ == "__main__":
    asyncio.run(main(loop_args.parse(__doc__, "computer-use-preview")))
