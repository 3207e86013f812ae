"""SAQ's internals are used in one module: `app/queue/saq_adapter.py`.

Everything else (app, worker, benches, tests) goes through SAQ's public names or the adapter,
so a SAQ upgrade that changes an internal breaks one module and its contract test
(`tests/integration/test_saq_adapter.py`), not code scattered across the project. Checked
here on the source: no access to a private attribute SAQ's queue, worker or job has (read
from the installed SAQ, so the list follows it), no undocumented submodule imported, and no
string spelling SAQ's Redis keys.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from redis.asyncio import Redis
from saq import Job, Queue, Worker
from saq.queue.redis import RedisQueue

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "app" / "queue" / "saq_adapter.py"
ADAPTER_CONTRACT_TEST = ROOT / "tests" / "integration" / "test_saq_adapter.py"
# `saq` itself exports Queue, Job, Worker, CronJob, Status; `RedisQueue` is the class
# `app.queue.enqueue.JobQueue` extends through its public hooks.
PUBLIC_MODULES = frozenset({"saq", "saq.queue.redis"})
# Public-looking names that are SAQ's bookkeeping rather than its API.
UNDOCUMENTED = frozenset({"job_task_contexts"})
# SAQ's Redis keys start with this; reading them is the adapter's business.
KEY_PREFIX = "saq:"


async def _noop(ctx: dict[str, object]) -> None:
    return None


def saq_private_names() -> frozenset[str]:
    """Every `_name` SAQ's queue, worker and job have, on the class or set by `__init__`."""
    queue = RedisQueue(Redis(), name="private-names")  # never connected
    worker = Worker(queue, functions=[_noop])
    names = set(vars(queue)) | set(vars(worker))
    for cls in (Queue, RedisQueue, Worker, Job):
        names |= set(dir(cls))
    return (
        frozenset(n for n in names if n.startswith("_") and not n.startswith("__")) | UNDOCUMENTED
    )


def sources() -> Iterator[Path]:
    for top in ("app", "worker", "bench", "tests"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path not in (ADAPTER, ADAPTER_CONTRACT_TEST, Path(__file__).resolve()):
                yield path


def uses_of_internals(tree: ast.AST, private: frozenset[str]) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        use = _internal_use(node, private)
        if use is not None:
            yield getattr(node, "lineno", 0), use


def _internal_use(node: ast.AST, private: frozenset[str]) -> str | None:
    if isinstance(node, ast.Attribute) and node.attr in private:
        # An object's own attribute of the same name (`self._queue`) is not SAQ's.
        own = isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}
        return None if own else ast.unparse(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) > 1:
        name = node.args[1]
        by_name = node.func.id in {"getattr", "setattr", "hasattr"}
        if by_name and isinstance(name, ast.Constant) and name.value in private:
            return ast.unparse(node)
    if isinstance(node, ast.ImportFrom) and node.level == 0 and _internal_module(node.module):
        return f"from {node.module} import ..."
    if isinstance(node, ast.Import):
        for alias in node.names:
            if _internal_module(alias.name):
                return f"import {alias.name}"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return repr(node.value) if node.value.startswith(KEY_PREFIX) else None
    return None


def _internal_module(name: str | None) -> bool:
    return name is not None and name.startswith("saq.") and name not in PUBLIC_MODULES


def test_the_check_sees_what_the_adapter_does() -> None:
    # The adapter is the one place allowed; if this finds nothing there, the check is blind.
    found = [
        use for _, use in uses_of_internals(ast.parse(ADAPTER.read_text()), saq_private_names())
    ]
    assert "queue._before_enqueue" in found
    assert "queue._incomplete" in found
    assert "from saq.utils import ..." in found


def test_no_module_but_the_adapter_uses_saq_internals() -> None:
    private = saq_private_names()
    assert {"_enqueue_script", "_before_enqueue", "_incomplete", "_queued", "_dump"} <= private
    uses = [
        f"{path.relative_to(ROOT)}:{line}: {use}"
        for path in sources()
        for line, use in uses_of_internals(ast.parse(path.read_text()), private)
    ]
    assert uses == [], "SAQ internals outside app/queue/saq_adapter.py:\n" + "\n".join(uses)
