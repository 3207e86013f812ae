"""Password hashing with argon2id (argon2-cffi's recommended parameters).

A hash or a check takes about half a second of CPU and 64 MiB on purpose, so web requests
never run one on the event loop: `hash_off_loop` and `verify_off_loop` run it on a small pool
of its own. The pool's size bounds the CPU and memory a burst of sign-ins or sign-ups can
take at once; requests beyond it wait their turn without holding the loop.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_HASHER = PasswordHasher()
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="argon2")

MIN_PASSWORD_LENGTH = 10
# Longer than any password manager makes; a megabyte "password" is only work for us.
MAX_PASSWORD_LENGTH = 1024


def hash_password(password: str) -> str:
    return _HASHER.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return _HASHER.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    return _HASHER.check_needs_rehash(password_hash)


async def hash_off_loop(password: str) -> str:
    return await asyncio.get_running_loop().run_in_executor(_POOL, hash_password, password)


async def verify_off_loop(password_hash: str, password: str) -> bool:
    if len(password) > MAX_PASSWORD_LENGTH:
        return False
    return await asyncio.get_running_loop().run_in_executor(
        _POOL, verify_password, password_hash, password
    )
