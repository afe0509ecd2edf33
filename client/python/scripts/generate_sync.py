"""Generates the synchronous client (src/askgate/_sync/client.py) from the asyncio one
(src/askgate/_async/client.py) with unasync: `async`/`await` dropped, the async names
turned into their sync ones. `python scripts/generate_sync.py [OUT]` writes into OUT (default:
src), so that the test script can check the committed file against a fresh one."""

import os
import sys

import unasync

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "src"))
    source = os.path.join(HERE, "src", "askgate", "_async")
    rule = unasync.Rule(
        fromdir=source + os.sep,
        todir=os.path.join(out, "askgate", "_sync") + os.sep,
        additional_replacements={
            "AsyncClient": "Client",
            "AsyncAgentLease": "AgentLease",
        },
    )
    unasync.unasync_files([os.path.join(source, "client.py")], rules=[rule])
    generated = os.path.join(out, "askgate", "_sync", "client.py")
    with open(generated, encoding="utf-8") as f:
        text = f.read()
    with open(generated, "w", encoding="utf-8") as f:
        f.write(HEADER + text)


HEADER = "# Generated from askgate/_async/client.py by scripts/generate_sync.py: do not edit.\n"


if __name__ == "__main__":
    main()
