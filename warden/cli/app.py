"""The ``warden`` command: one module per command group, each with ``register(app)``; a command
line imports only the module of the command it names (see COMMAND_MODULE)."""

from __future__ import annotations

import functools
import importlib
import sys
from typing import Any

import typer
import typer.main

from warden.cli.common import say_error
from warden.cli.exits import interrupt_exit, run_command, sigterm_received
from warden.errors import UsageError


def _print_version(value: bool) -> None:
    if value:
        from warden import __version__

        print(f"warden {__version__}")
        raise typer.Exit()


def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print warden's version and exit.")) -> None:
    """Makes coding agents measurably cheaper: collect, distill, bench, select, compile."""


# Command groups, in the order of the pipeline.
COMMAND_MODULES = ("db", "collect", "bench", "sim", "distill", "select", "continuity", "ledger", "report")

# The module that registers each top-level command (a test holds it to what they register): a
# command imports its own module only, not every stage's (the collector, the rule ledger,
# continuity, compile: ~0.15 s); --help, --version and a mistyped command get every module.
COMMAND_MODULE = {
    "db": "db",
    "collect": "collect", "sessions": "collect", "status": "collect", "install-hooks": "collect",
    "uninstall-hooks": "collect", "hook": "collect",
    "bench": "bench",
    "sim": "sim",
    "distill": "distill", "rules": "distill",
    "select": "select", "receipt": "select", "receipts": "select", "plan": "select", "nightly": "select",
    "demo": "select", "memory": "select",
    "recover": "continuity", "checkpoints": "continuity",
    "share": "ledger", "verify-ledger": "ledger", "adopt": "ledger",
    "cost": "report", "report": "report",
}


@functools.cache
def app_of(modules: tuple[str, ...]) -> typer.Typer:
    """The ``warden`` app with the commands of ``modules`` (all: the whole CLI)."""
    app = typer.Typer(
        name="warden",
        help="Makes coding agents measurably cheaper: collect, distill, bench, select, compile.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    app.callback()(_root)
    for name in COMMAND_MODULES:  # in this order whatever the caller's: --help lists them so
        if name in modules:
            importlib.import_module(f"warden.cli.{name}").register(app)
    return app


def _app_for(argv: list[str]) -> typer.Typer:
    """The app a command line needs: its command's module only when it names one first."""
    module = COMMAND_MODULE.get(argv[0]) if argv else None
    return app_of((module,) if module else COMMAND_MODULES)


def __getattr__(name: str) -> Any:
    if name == "app":  # the whole CLI, built on first use
        return app_of(COMMAND_MODULES)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# typer ≥ 0.2x vendors click as ``typer._click`` (no ``click`` module installed); its errors
# derive from the ClickException of whichever click typer uses, found through a public class.
_CLICK_EXCEPTION: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def _report_click_error(exc: Exception) -> int:
    """A bad option or argument: one line ``warden: …`` and exit 2 (no-args help is shown as is)."""
    if type(exc).__name__.startswith("NoArgsIsHelp"):
        text = exc.format_message()  # type: ignore[attr-defined]  # empty when rich already printed it
        if text.strip():
            print(text)
        return 0
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None and getattr(ctx, "command_path", "") else ""
    message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
    say_error(f"{message}{hint}")
    return int(getattr(exc, "exit_code", 2) or 2)


def _without_flag_types(command: Any) -> Any:
    """``command`` with an empty type column for on/off flags: typer's help would show ``<bool>``
    after every flag, as if it took a value."""
    for param in getattr(command, "params", ()):
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
            if "--json" in getattr(param, "opts", ()) and not getattr(param, "help", None):
                param.help = "Print JSON instead of text."
        elif param.param_type_name == "option" and param.metavar is None and param.name:
            param.metavar = param.name.upper()  # "--agent AGENT", not the type's name "<str>"
    make_help_option = command.get_help_option  # --help is made per invocation

    def help_option(ctx: Any) -> Any:
        option = make_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = help_option
    for sub in getattr(command, "commands", {}).values():
        _without_flag_types(sub)
    return command


# Options an empty value is a fair answer to: hook scripts pass "$SESSION", "$PWD" and the prompt
# as they have them (a session just started has no id yet), and an empty scope is no scope.
_MAY_BE_EMPTY = {"--prompt", "--session-id", "--cwd", "--scope"}


# Options click takes as optional that the command itself then requires (with its own message).
_REQUIRED_BY_THE_COMMAND = {("sim", "truth"): {"--rules", "--rule"}}


def _is_required(command: Any, argv: list[str], option: str) -> bool:
    """Whether ``option`` of the (sub)command ``argv`` names must be given: then "leave it out" is
    no advice."""
    path: list[str] = []
    for arg in argv:  # down the command groups, by the names in argv
        sub = getattr(command, "commands", {}).get(arg)
        if sub is None and getattr(command, "commands", None):
            break
        if sub is not None:
            command = sub
            path.append(arg)
    if option in _REQUIRED_BY_THE_COMMAND.get(tuple(path), ()):
        return True
    return any(option in getattr(p, "opts", ()) and getattr(p, "required", False)
               for p in getattr(command, "params", ()))


def _refuse_empty_arguments(argv: list[str], command: Any = None) -> None:
    """An empty (or blank) argument is a slip (an unset shell variable), never a choice:
    ``collect ""`` would read the current directory, ``--agent ""`` mean every agent and
    ``--since " "`` no limit."""
    for index, arg in enumerate(argv):
        name, equals, value = arg.partition("=")
        option = name if arg.startswith("--") and equals and not value.strip() else None
        blank = not arg.strip()
        before = argv[index - 1] if index else ""
        if option in _MAY_BE_EMPTY or (blank and before in _MAY_BE_EMPTY):
            continue
        if blank or option:
            named = option or (before if before.startswith("-") else None)
            if named and command is not None and _is_required(command, argv[:index], named):
                raise UsageError(f"empty value for {named}: give one (the option is required)")
            raise UsageError(f"empty value for {named}: give one, or leave the option out" if named
                             else "an argument is empty: give a value (a path, an id, a name)")


def main(argv: list[str] | None = None) -> int:
    """Entry point: one clear line and a non-zero exit for every user-facing failure."""
    return run_command(lambda: _run(argv), argv, _typer_failure)


def _run(argv: list[str] | None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    command = _without_flag_types(typer.main.get_command(_app_for(args)))
    _refuse_empty_arguments(args, command)
    result = command.main(args=argv, prog_name="warden", standalone_mode=False)
    # Non-standalone typer turns Ctrl-C (and typer.Exit) into a returned exit code.
    if isinstance(result, int) and result != 0:
        return interrupt_exit(argv) if result == 130 else result
    return 0


def _typer_failure(exc: Exception, argv: list[str] | None) -> int | None:
    """The exit code of what typer (or the click it vendors) raised; None for anything else."""
    if isinstance(exc, typer.Exit):
        return exc.exit_code
    if isinstance(exc, typer.Abort):
        if sigterm_received():
            return interrupt_exit(argv)
        say_error("aborted")
        return 130
    if isinstance(exc, _CLICK_EXCEPTION):
        return _report_click_error(exc)
    return None


if __name__ == "__main__":
    sys.exit(main())
