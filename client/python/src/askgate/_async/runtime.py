"""What the asyncio client needs of its runtime: its channel, bound to an event loop,
its sleep and errors, and the lease of an attached agent. `askgate._sync.runtime`
gives the synchronous client the same names; `client.py` is written against them once."""

from __future__ import annotations

import asyncio
from typing import Any, Optional

import grpc
import grpc.aio

from .._connection import Stubs, Target
from .._errors import AskgateError

RpcError = grpc.aio.AioRpcError
sleep = asyncio.sleep

CLIENT_DOC = """`Client` for asyncio: the same methods, awaitable (`follow` is an async
iterator, `attach` an async context manager). It may be made anywhere (at module level,
before `asyncio.run`); its channel is opened in the event loop that first uses it, and
the client belongs to that loop from then on: using it from another loop while that one
is open raises `RuntimeError` (make one client per loop). Once that loop is closed
(`asyncio.run` returned), the next loop to use the client opens a new channel. `await
client.close()` (or `async with`) when done. Cancelling a call (its task) drops it."""


class Channel:
    """The client's channel, opened in the event loop that first uses it."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stubs: Optional[Stubs] = None

    def stubs(self) -> Stubs:
        """The channel and stubs of the running loop (opened on first use)."""
        loop = asyncio.get_running_loop()
        if self._stubs is not None and self._loop is not loop:
            if self._loop is not None and not self._loop.is_closed():
                raise RuntimeError(
                    "this askgate AsyncClient belongs to the event loop that first used it, "
                    "which is still open: make one AsyncClient per event loop"
                )
            self._stubs = None
        if self._stubs is None:
            self._loop, self._stubs = loop, Stubs(self._target.channel(grpc.aio))
        return self._stubs

    async def close(self) -> None:
        stubs, loop = self._stubs, self._loop
        if stubs is None or loop is None or loop.is_closed():
            self._stubs = None
            return
        if loop is not asyncio.get_running_loop():
            raise RuntimeError("close this askgate AsyncClient in the event loop that used it")
        self._stubs = None
        await stubs.channel.close()


async def first(stream: Any) -> Any:
    """The stream's first message, or None when it ended without one."""
    message = await stream.read()
    return None if message is grpc.aio.EOF else message


class AsyncAgentLease:
    """A held `Agents.Attach` stream; `ended` (an `asyncio.Event`) is set when the
    server ends the lease (a newer attach replaced it, the node drained, the credential
    lapsed), with `error` saying why."""

    def __init__(self, incarnation: str, stream: Any) -> None:
        self.incarnation = incarnation
        self.ended = asyncio.Event()
        self.error: Optional[AskgateError] = None
        self._stream = stream
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            async for _heartbeat in self._stream:
                pass
        except grpc.aio.AioRpcError as failure:
            if failure.code() != grpc.StatusCode.CANCELLED:
                self.error = AskgateError.from_rpc_error(failure)
        except asyncio.CancelledError:
            pass
        finally:
            self.ended.set()

    def _stop(self) -> None:
        self._stream.cancel()
        self._reader.cancel()
