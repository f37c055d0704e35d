"""`ondemand`: one command line for every part. Each subcommand lives with its package and parses
its own options, so `ondemand runner` needs none of the service's dependencies, and the
developer tools (`sandbox`, `demo`) are imported only when asked for."""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module, function taking argv, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "serve": ("service.server", "main", "run the service (webhook, runner API, pages, metrics)"),
    "app-manifest": ("service.app_manifest", "main", "print the GitHub App manifest it needs"),
    "runner": ("runner.cli", "daemon_main", "run the runner daemon on this machine"),
    "run": ("runner.cli", "run_main", "run one OP:BACKEND workflow here and print the report"),
    "doctor": ("ondemand.doctor", "main", "check a service's or a runner's deployment"),
    "sandbox": ("sandbox.cli", "main", "run a local GitHub-compatible server (development)"),
    "demo": ("devtools.demo", "main", "sandbox + service + cpu runner; comment /test; show result"),
}


def usage() -> str:
    lines = ["usage: ondemand COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<12} {text}" for name, (_, _, text) in COMMANDS.items()]
    lines += ["", "`ondemand COMMAND --help` for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"ondemand: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module, func, _ = COMMANDS[name]
    entry = getattr(importlib.import_module(module), func)
    return int(entry(rest) or 0)
