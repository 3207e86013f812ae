"""Command line for the web side: `python -m app serve | migrate | create-user | invite | ...`.

Settings are loaded before anything else, so a missing or malformed one stops the process
with one line naming it (exit status 2) instead of a stack trace from deep inside a server.

Each command imports what it runs when it runs: the web application, the migrations and the
services behind the other commands take seconds of CPU to import, and `worker-health` runs
every 30 s in a busy worker's container as its health check, with a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import socket
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.heartbeat import HEARTBEAT_STALE_S, HEARTBEAT_TTL_S, host_heartbeat
from app.logs import configure_logging
from app.settings import Settings, SettingsError, load_settings

if TYPE_CHECKING:
    from app.accounts.token_rotation import RotationReport
    from app.resources import Resources
    from app.workspaces.members import WorkspaceChoice

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app", description="OnceReply web process")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve the web app (dashboard and webhooks)")
    serve.add_argument("--host", help="interface to bind (default: $HOST, else 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default: $PORT, else 8000)")

    create_user = commands.add_parser("create-user", help="create a user who owns a new workspace")
    create_user.add_argument("--email", required=True)
    create_user.add_argument(
        "--password", help="read from ONCEREPLY_PASSWORD or a prompt if omitted"
    )
    create_user.add_argument("--workspace", help="workspace name")
    create_user.add_argument(
        "--if-missing", action="store_true", help="succeed quietly when the user already exists"
    )
    create_user.add_argument(
        "--reset-password",
        action="store_true",
        help="when the user already exists, set their password to this one instead",
    )

    invite = commands.add_parser(
        "invite", help="make an invite link to a workspace (printed, never sent by email)"
    )
    invite.add_argument("--email", required=True, help="the owner or admin who invites")
    invite.add_argument("--invitee", required=True, help="the email of the person invited")
    invite.add_argument("--role", default="member", help="member (default) or admin")
    invite.add_argument("--workspace", help="the workspace's name, when the inviter has several")

    commands.add_parser("check-settings", help="load the settings and report the first problem")
    commands.add_parser("migrate", help="apply every database migration (alembic upgrade head)")
    redrive = commands.add_parser(
        "redrive-webhooks",
        help="re-ingest webhook events that a failing ingest set aside (after fixing the cause)",
    )
    redrive.add_argument(
        "--since", type=datetime.fromisoformat, help="only events received at or after (ISO)"
    )

    commands.add_parser(
        "rotate-tokens",
        help="re-encrypt every stored Instagram token under ENCRYPTION_KEY (after a key change)",
    )

    worker_health = commands.add_parser(
        "worker-health",
        help=f"exit 0 only if a worker on this host beat within {HEARTBEAT_STALE_S} s "
        "(the worker container's health check)",
    )
    worker_health.add_argument(
        "--host", default=socket.gethostname(), help="whose worker (default: this hostname)"
    )

    args = parser.parse_args(argv)
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"oncereply: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)

    if args.command == "serve":
        host = args.host or os.environ.get("HOST") or "127.0.0.1"
        port = args.port if args.port is not None else _port_from_env()
        if port is None:
            print("oncereply: PORT: must be a port number (1-65535)", file=sys.stderr)
            return 2
        return _serve(settings, host, port)
    if args.command == "create-user":
        password = args.password or os.environ.get("ONCEREPLY_PASSWORD") or getpass.getpass()
        return asyncio.run(
            _create_user(
                settings,
                args.email,
                password,
                args.workspace,
                if_missing=args.if_missing,
                reset_password=args.reset_password,
            )
        )
    if args.command == "invite":
        return asyncio.run(_invite(settings, args.email, args.invitee, args.role, args.workspace))
    if args.command == "redrive-webhooks":
        return asyncio.run(_redrive(settings, args.since))
    if args.command == "worker-health":
        return asyncio.run(_worker_health(settings, args.host))
    if args.command == "rotate-tokens":
        return asyncio.run(_rotate_tokens(settings))
    if args.command == "migrate":
        from alembic import command as alembic_command
        from alembic.config import Config as AlembicConfig

        alembic_command.upgrade(AlembicConfig(str(ROOT / "alembic.ini")), "head")
        return 0
    print("settings are valid")
    return 0


def _port_from_env() -> int | None:
    raw = os.environ.get("PORT", "").strip() or "8000"
    if not raw.isdigit() or not 1 <= int(raw) <= 65535:
        return None
    return int(raw)


def _serve(settings: Settings, host: str, port: int) -> int:
    import uvicorn

    from app.asgi import create_app
    from app.web.bounded_protocol import KEEP_ALIVE_S, bounded_protocol

    uvicorn.run(
        create_app(settings),
        host=host,
        port=port,
        log_level=settings.log_level.lower(),
        access_log=False,
        proxy_headers=True,
        # Only the reverse proxy's forwarded headers count; uvicorn ignores everyone else's.
        forwarded_allow_ips=list(settings.trusted_proxies),
        timeout_graceful_shutdown=10,
        timeout_keep_alive=KEEP_ALIVE_S,
        http=bounded_protocol(settings.request_read_timeout_s),
    )
    return 0


async def _open_resources(settings: Settings) -> Resources:
    """The database and the queue for one command (one connection)."""
    from app.jobs.registry import JOB_OPTIONS
    from app.resources import Resources

    return await Resources.open(settings, jobs=JOB_OPTIONS, db_pool_size=1)


async def _redrive(settings: Settings, since: datetime | None) -> int:
    from app.delivery.intake.outbox import redrive_failed

    resources = await _open_resources(settings)
    try:
        async with resources.sessionmaker() as session, session.begin():
            count = await redrive_failed(session, since=since)
    finally:
        await resources.close()
    print(f"returned {count} webhook events to the outbox; the worker ingests them shortly")
    return 0


async def _worker_health(settings: Settings, host: str) -> int:
    # Redis alone: a health check must not need the database, nor open a pool of connections.
    redis = Redis.from_url(settings.redis_url, socket_connect_timeout=3, socket_timeout=3)
    now = time.time()
    try:
        beat = await host_heartbeat(redis, host, now)
    except RedisError as exc:
        print(f"oncereply: cannot read worker heartbeats from Redis: {exc}", file=sys.stderr)
        return 1
    finally:
        await redis.aclose()
    if beat is None:
        print(f"no worker heartbeat from {host} in the last {HEARTBEAT_TTL_S} s", file=sys.stderr)
        return 1
    age = beat.age(now)
    if age > HEARTBEAT_STALE_S:
        print(
            f"worker {beat.worker_id} last beat {age:.0f} s ago "
            f"(stale after {HEARTBEAT_STALE_S} s: wedged?)",
            file=sys.stderr,
        )
        return 1
    print(f"worker {beat.worker_id} beat {age:.0f} s ago, {beat.jobs_done} jobs done")
    return 0


async def _rotate_tokens(settings: Settings) -> int:
    from app.accounts.token_rotation import rotate_tokens

    resources = await _open_resources(settings)
    try:
        report = await rotate_tokens(resources.sessionmaker, resources.cipher)
    finally:
        await resources.close()
    print(_rotation_summary(report))
    # Non-zero until nothing needs an old key, so a script never drops a key still in use.
    return 0 if report.remaining == 0 else 1


def _rotation_summary(report: RotationReport) -> str:
    lines = [
        f"current key {report.key_id}: re-sealed {report.resealed}, "
        f"already current {report.already_current}, "
        f"changed during the run {report.changed} (left as their writer stored them), "
        f"unreadable {len(report.unreadable_accounts)}"
    ]
    if report.unreadable_accounts:
        ids = ", ".join(str(account_id) for account_id in report.unreadable_accounts)
        lines.append(
            f"unreadable tokens (instagram_accounts.id {ids}): their key is not in "
            "ENCRYPTION_KEY or ENCRYPTION_OLD_KEYS; add it back, or reconnect those accounts"
        )
    if report.remaining:
        lines.append(
            f"{report.remaining} tokens are still under another key: keep ENCRYPTION_OLD_KEYS "
            "and run rotate-tokens again once every process uses the new ENCRYPTION_KEY"
        )
    else:
        lines.append("no token needs an old key any more: ENCRYPTION_OLD_KEYS can be emptied")
    return "\n".join(lines)


async def _create_user(
    settings: Settings,
    email: str,
    password: str,
    workspace: str | None,
    *,
    if_missing: bool,
    reset_password: bool,
) -> int:
    from app.auth.users import InvalidUserError, UserExistsError, set_password
    from app.workspaces.service import create_user_with_workspace

    resources = await _open_resources(settings)
    try:
        async with resources.sessionmaker() as session, session.begin():
            created = await create_user_with_workspace(
                session, email=email, password=password, workspace_name=workspace
            )
    except UserExistsError:
        if reset_password:
            async with resources.sessionmaker() as session, session.begin():
                await set_password(session, email=email, password=password)
            print(f"user {email} exists; their password is now the one given")
            return 0
        if if_missing:
            return 0
        print(f"oncereply: a user with email {email} already exists", file=sys.stderr)
        return 1
    except InvalidUserError as exc:
        print(f"oncereply: {exc}", file=sys.stderr)
        return 2
    finally:
        await resources.close()
    print(f"created user {email} (id {created.user_id}) owning workspace {created.workspace_id}")
    return 0


async def _invite(
    settings: Settings, inviter_email: str, invitee: str, role_name: str, workspace: str | None
) -> int:
    from app.auth.users import find_user_by_email
    from app.workspaces.invites import InviteCreated, create_invite, invite_link, parse_invite_role
    from app.workspaces.members import workspaces_of
    from app.workspaces.roles import Problem

    role = parse_invite_role(role_name)
    if role is None:
        print(f"oncereply: --role must be member or admin, not {role_name!r}", file=sys.stderr)
        return 2
    resources = await _open_resources(settings)
    try:
        async with resources.sessionmaker() as session, session.begin():
            inviter = await find_user_by_email(session, inviter_email)
            if inviter is None:
                print(f"oncereply: no user with email {inviter_email}", file=sys.stderr)
                return 1
            allowed = [
                choice
                for choice in await workspaces_of(session, inviter.id)
                if choice.role.can_change
                and (
                    workspace is None
                    or choice.name.casefold() == workspace.strip().casefold()
                    or str(choice.id) == workspace.strip()
                )
            ]
            if len(allowed) != 1:
                print(
                    f"oncereply: {_which_workspace(inviter_email, workspace, allowed)}",
                    file=sys.stderr,
                )
                return 1
            chosen = allowed[0]
            result = await create_invite(
                session,
                workspace_id=chosen.id,
                inviter_id=inviter.id,
                email=invitee,
                role=role,
            )
    finally:
        await resources.close()
    if not isinstance(result, InviteCreated):
        print(f"oncereply: {result.message}", file=sys.stderr)
        return 2 if result.problem is Problem.INVALID else 1
    # The link alone on stdout, for scripts; what it is on stderr, for people.
    print(
        f"invited {result.email} as {result.role.value} of {chosen.name!r}; the link works once, "
        f"until {result.expires_at:%Y-%m-%d %H:%M} UTC",
        file=sys.stderr,
    )
    print(invite_link(settings.public_base_url, result.token))
    return 0


def _which_workspace(inviter: str, asked: str | None, allowed: list[WorkspaceChoice]) -> str:
    if allowed:
        names = ", ".join(f"{choice.name!r} (id {choice.id})" for choice in allowed)
        return f"{inviter} can invite to several workspaces; choose one with --workspace: {names}"
    if asked is None:
        return f"{inviter} is not an owner or admin of any workspace"
    return f"{inviter} is not an owner or admin of a workspace named {asked!r}"


if __name__ == "__main__":
    sys.exit(main())
