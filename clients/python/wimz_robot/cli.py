"""``wimz-robot``: the robot library's command line.

    wimz-robot bridge --relay URL --device ID [--local http://127.0.0.1:8000] [--turn-file PATH]
                      (the robot token from WIMZ_ROBOT_TOKEN)
    wimz-robot standin [--host 127.0.0.1] [--port 8000]      (the integration guide's robot, for tests)
    wimz-robot --version
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from ._version import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wimz-robot", description="The WIM-Z robot's side of the wimz-relay.")
    parser.add_argument("--version", action="version", version=__version__)
    commands = parser.add_subparsers(dest="command", required=True)
    bridge = commands.add_parser("bridge", help="connect as the robot and bridge the relay to the robot's local API")
    bridge.add_argument("--relay", required=True, help="the relay's base URL, e.g. https://api.wimzai.com")
    bridge.add_argument("--device", required=True, help="this robot's device id")
    bridge.add_argument("--local", default="http://127.0.0.1:8000", help="the robot's own API (REST and /ws/control)")
    bridge.add_argument("--turn-file", default=os.environ.get("WIMZ_TURN_FILE"),
                        help="where fresh TURN credentials are written (JSON, replaced atomically; env WIMZ_TURN_FILE)")
    bridge.add_argument("--max-body", type=int, default=1 << 20, help="largest response body passed back (bytes)")
    bridge.add_argument("--log-level", default="INFO")
    standin = commands.add_parser("standin", help="serve the integration guide's robot API (tests and demos)")
    standin.add_argument("--host", default="127.0.0.1")
    standin.add_argument("--port", type=int, default=8000)
    standin.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    if args.command == "bridge":
        token = os.environ.get("WIMZ_ROBOT_TOKEN")
        if not token:
            print("wimz-robot bridge: set WIMZ_ROBOT_TOKEN to the robot's token", file=sys.stderr)
            return 2
        from .bridge import Bridge
        try:
            runner = Bridge(args.relay, args.device, token, args.local, turn_file=args.turn_file, max_body=args.max_body)
        except ValueError as error:
            print(f"wimz-robot bridge: {error}", file=sys.stderr)
            return 2
        return _run(runner.run())

    from .standin import serve

    async def stand_in() -> None:
        await serve(args.host, args.port)
        logging.getLogger("wimz_robot.standin").info("stand-in robot on http://%s:%d", args.host, args.port)
        await asyncio.Event().wait()
    return _run(stand_in())


def _run(coroutine) -> int:  # type: ignore[no-untyped-def]
    try:
        asyncio.run(coroutine)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
