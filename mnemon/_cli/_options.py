"""What every `mnemon` command shares: identity flags, `--json`, errors, hints, running a job.

A leaf module: the command modules import it, never the other way round.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import anyio
import click
from pydantic import ValidationError

from .._errors import ActionError, MnemonError, RouteError
from .._models import Scope, describe_validation_error
from .._profile import PROFILE_FILE, find_profile
from .._text import visible_json, visible_text
from ._paths import current_folder, shown_path
from ._render import Printer

__all__ = [
    "IDENTITY",
    "INTERRUPTED",
    "CommandError",
    "FlagError",
    "confirm",
    "echo_json",
    "error_code",
    "hint",
    "identity",
    "interrupted",
    "json_input",
    "json_option",
    "not_confirmed",
    "printer_of",
    "profile_path",
    "read_text_argument",
    "remember_profile_flag",
    "require_confirmation",
    "run",
    "scope_of",
    "user_message",
    "wants_json",
    "with_profile_flag",
]

_T = TypeVar("_T")

IDENTITY = (
    ("user", "user_id", "The user the memory is about."),
    ("agent", "agent_id", "The agent acting."),
    ("session", "session_id", "The conversation or session."),
    ("workspace", "workspace", "The project workspace (documents live here)."),
    ("tenant", "tenant_id", "The tenant, for shared deployments."),
)

MAX_IDENTITY = 300
INTERRUPTED = 130  # the shell's status for a command ended by SIGINT (128 + 2)


class CommandError(click.ClickException):
    """A failed command: one line on stderr (or a JSON error under `--json`), exit status 1.

    Args:
        message: what went wrong, naming the object and the rule; never a secret or memory text.
        code: a stable machine-readable code (`unknown-route`, `missing-scope`, ...).
    """

    def __init__(
        self, message: str, *, code: str = "failed", detail: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.detail = dict(detail or {})


class FlagError(CommandError):
    """A bad flag value: one line naming the flag and the rule, exit status 2 like click's."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message, code="invalid-flag")


def _check_identity(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # the rules of a scope value, checked here so the message names the flag, never the value
    if value is None:
        return None
    flag = f"--{param.name}"
    if any("\ud800" <= character <= "\udfff" for character in value):
        raise FlagError(f"{flag}: must be valid UTF-8 text")  # undecodable bytes in argv
    if not value:
        raise FlagError(f"{flag}: must not be empty")
    if len(value) > MAX_IDENTITY:
        raise FlagError(f"{flag}: must be at most {MAX_IDENTITY} characters")
    if any(character < " " or character == "\x7f" for character in value):
        raise FlagError(f"{flag}: must not contain control characters (tab, newline, DEL, ...)")
    return value


def identity(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add `--user`, `--agent`, `--session`, `--workspace`, `--tenant`: they fill the scope."""
    for flag, _, text in reversed(IDENTITY):
        command = click.option(f"--{flag}", default=None, help=text, callback=_check_identity)(
            command
        )
    return command


def _remember_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.find_root().ensure_object(dict)["json"] = True
    return value


def json_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add `--json`: the result as one JSON document, and errors as JSON too."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        is_eager=True,  # known before any other flag can fail, so that failure is JSON too
        callback=_remember_json,
        help="Print the result (or the error) as JSON.",
    )(command)


def wants_json(ctx: click.Context) -> bool:
    """Whether this invocation asked for JSON output."""
    return bool(ctx.find_root().ensure_object(dict).get("json"))


def scope_of(options: Mapping[str, Any]) -> Scope:
    """The scope the identity flags describe.

    Raises:
        FlagError: a flag breaks a rule of `Scope` the flag checks did not catch.
    """
    fields = {field: options[flag] for flag, field, _ in IDENTITY if options.get(flag) is not None}
    try:
        return Scope.model_validate(fields)
    except ValidationError as exc:
        raise FlagError(describe_validation_error(exc, "identity")) from None


def interrupted(message: str = "interrupted") -> NoReturn:
    """Say on stderr what an interruption (Ctrl-C) left behind; exit with status 130."""
    click.echo(message, err=True)
    sys.exit(INTERRUPTED)


def error_code(exc: BaseException) -> str:
    """The code of a mnemon error (`unknown-route`), or its class name in kebab case."""
    code = getattr(exc, "code", None)
    if isinstance(code, str) and code:
        return code
    name = type(exc).__name__
    return "".join(f"-{c.lower()}" if c.isupper() else c for c in name).lstrip("-")


# what a Source's failure means in a person's words, by its code, else by its class; the code
# itself stays beside it for scripts and for the docs
_SOURCE_FAILURES = {
    "timeout": "it did not answer in time",
    "rate_limited": "it is rate limited",
    "provider_error": "the service behind it failed",
    "unauthorized": "it refused the credentials it was given",
    "forbidden": "it refused access",
    "invalid_payload": "it refused the input",
    "schema_mismatch": "it answered in a form mnemon does not accept",
    "degraded": "it is degraded",
    "idempotency-conflict": "this idempotency key was already used for a different write",
    "contract": "it answered in a form mnemon does not accept",
}
_FAILURE_KINDS = {
    "transient": "it failed for now",
    "access": "it refused access",
    "terminal": "it refused the request",
    "degraded": "it is degraded",
}


def user_message(exc: MnemonError) -> str:
    """A mnemon error as a person reads it: a Source's failure in plain words, not the engine's.

    An error a Source's call caused names the Source, what did not happen, why (by its code
    or failure class), when to try again, and, for a write, whether anything was written. Any
    other error is its own message. Control and bidi characters are escaped either way.
    """
    key = getattr(exc, "source_key", None)
    code = getattr(exc, "code", None)
    if not isinstance(key, str) or not isinstance(code, str):
        return visible_text(str(exc), keep_newlines=False)
    doing = (
        "did not write" if isinstance(exc, ActionError)
        else "could not be read" if isinstance(exc, RouteError)
        else "could not do it"
    )  # fmt: skip
    why = _SOURCE_FAILURES.get(code) or _FAILURE_KINDS.get(getattr(exc, "kind", None) or "")
    parts = [f"{key} {doing}: {why or 'it failed'}"]
    origin = getattr(exc, "origin_code", None)
    if origin:
        parts[0] += f" (its own code: {origin})"
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        parts.append(f"try again in {max(1, math.ceil(retry_after))} s")
    elif getattr(exc, "retryable", False):
        parts.append("trying again later may work")
    completion = getattr(getattr(exc, "receipt", None), "completion", None)
    if completion == "failed":
        parts.append("nothing was written")
    elif completion == "unknown":
        parts.append("the write may or may not have happened")
    return visible_text("; ".join(parts), keep_newlines=False)


def run(job: Callable[[], Awaitable[_T]], on_interrupt: Callable[[], str] | None = None) -> _T:
    """Run one async job; mnemon's own errors become a one-line message and exit status 1.

    On Ctrl-C, `on_interrupt()` (when given) says what the job left behind.
    """
    try:
        return anyio.run(job)
    except CommandError:
        raise
    except MnemonError as exc:
        message = user_message(exc)
        if getattr(exc, "source_key", None) is not None:
            message = f"{error_code(exc)}: {message}"
        raise CommandError(message, code=error_code(exc)) from None
    except KeyboardInterrupt:
        interrupted("interrupted" if on_interrupt is None else on_interrupt())


def echo_json(document: str | Any) -> None:
    """Print a JSON document (text or a JSON value) with control and bidi characters escaped."""
    if not isinstance(document, str):
        document = json.dumps(document, indent=2, ensure_ascii=False)
    click.echo(visible_json(document))


def printer_of(ctx: click.Context) -> Printer:
    """The command's printer (colors only on a terminal, unless `--no-color`)."""
    printer: Printer = ctx.find_root().ensure_object(dict)["printer"]
    return printer


def profile_path(ctx: click.Context) -> Path:
    """The profile this command uses: `-p`, `$MNEMON_PROFILE`, else the nearest `mnemon.toml`.

    Like git, the nearest is searched in the current folder and then in each parent folder;
    when there is none, the current folder's (which does not exist yet) is used.
    """
    state = ctx.find_root().ensure_object(dict)
    explicit: Path | None = state.get("profile")
    if explicit is not None:
        return explicit
    cwd = working_folder()
    return find_profile(cwd) or cwd / PROFILE_FILE


def working_folder() -> Path:
    """The current folder, which a command without `-p PROFILE` works in.

    Raises:
        CommandError: it no longer exists (deleted, or moved away, while the shell stayed).
    """
    cwd = current_folder()
    if cwd is None:
        raise CommandError(
            "the current folder no longer exists (deleted or moved): change to a folder that "
            "exists",
            code="no-current-folder",
        )
    return cwd


_GIVEN: dict[str, str] = {}  # the -p of this invocation, for hints in error messages too
_HINTED = re.compile(r"`mnemon (?!demo`)")


def remember_profile_flag(given: str | None) -> None:
    """Keep the `-p PROFILE` this invocation was given, for every hint it prints."""
    _GIVEN.clear()
    if given is not None:
        if Path(given).is_absolute():
            # an absolute path can carry a secret: shown relative to a known folder, or by name
            given = shown_path(Path(given), name_if_outside=True)
        _GIVEN["profile"] = shlex.quote(given)


def hint(ctx: click.Context, command: str) -> str:
    """`mnemon COMMAND`, keeping the `-p PROFILE` this invocation was given."""
    del ctx
    given = _GIVEN.get("profile")
    return f"mnemon {command}" if given is None else f"mnemon -p {given} {command}"


def with_profile_flag(text: str) -> str:
    """`text` with the `-p PROFILE` of this invocation added to each `mnemon ...` it quotes."""
    given = _GIVEN.get("profile")
    return text if given is None else _HINTED.sub(f"`mnemon -p {given} ", text)


def read_text_argument(text: str | None, file: Path | None, *, what: str = "TEXT") -> str:
    """The text of an argument: itself, `-` for standard input, or `--file FILE`.

    Raises:
        CommandError: both or neither were given, or the file cannot be read as UTF-8.
    """
    if text is not None and file is not None:
        raise FlagError(f"give {what} or --file, not both")
    if file is not None:
        try:
            return file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise FlagError("--file: must be UTF-8 text") from None
        except OSError as exc:
            name = shown_path(file, name_if_outside=True)
            raise FlagError(f"--file: cannot read {name} ({exc.strerror or 'error'})") from None
    if text is None:
        raise FlagError(f"missing {what} (or - to read it from standard input, or --file)")
    if text == "-":
        data = sys.stdin.buffer.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise FlagError(f"{what} from standard input: must be UTF-8 text") from None
    return text


def json_input(text: str | None, file: Path | None) -> dict[str, Any]:
    """The JSON object of an argument (or `-`, or `--file FILE`); `{}` when neither is given.

    Raises:
        FlagError: the text is not JSON, or not a JSON object.
    """
    raw = read_text_argument(text if text is not None or file else "{}", file, what="JSON")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise FlagError(f"JSON: not valid JSON (line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(value, dict):
        raise FlagError('JSON: must be a JSON object, e.g. \'{"query": "tea"}\'')
    return value


def confirm(question: str, *, err: bool = False) -> bool:
    """Ask yes or no on the terminal; no answer (end of input) is no.

    Ctrl-C at the prompt raises KeyboardInterrupt at once: the event loop's own SIGINT handler
    only cancels the running task, which a blocking read never notices.
    """
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    if main:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        while True:
            click.echo(f"{question} [y/N]: ", nl=False, err=err)
            answer = sys.stdin.readline()
            if not answer:
                click.echo(err=err)
                return False
            answer = answer.strip().lower()
            if answer in ("y", "yes"):
                return True
            if answer in ("", "n", "no"):
                return False
            click.echo("please answer y or n", err=err)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


def require_confirmation(yes: bool, question: str, *, as_json: bool = False) -> None:
    """Go on if `yes` or the person answers yes to `question`, else stop changing nothing.

    With `as_json`, the question goes to stderr so that stdout stays one JSON document.

    Raises:
        CommandError: the person did not confirm (`not-confirmed`).
    """
    if not yes and not confirm(question, err=as_json):
        raise not_confirmed()


def not_confirmed() -> CommandError:
    """The one error every command gives when the person answers no: nothing was changed."""
    return CommandError("nothing was changed: you did not confirm", code="not-confirmed")
