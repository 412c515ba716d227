"""What both Python loops take on their command line."""

import argparse


def parse(doc, model):
    """The loop's arguments: the task, the model, a transcript to replay,
    and the MCP server's command line after --."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--task", required=True, help="what to ask the model to do")
    p.add_argument("--model", default=model)
    p.add_argument("--max-turns", type=int, default=30)
    p.add_argument("--replay", help="a recorded transcript to answer as the model")
    p.add_argument("server", nargs="+", help="the MCP server's command line, after --")
    return p.parse_args()
