"""Where askgate is and how to reach it; when to try again."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional, Tuple

import grpc

from ._errors import AskgateError, Reason
from .v1 import askgate_pb2_grpc as rpc

DEFAULT_ADDR = "http://127.0.0.1:50051"


@dataclass(frozen=True)
class Target:
    """An askgate server: its address (`http://host:port`, `https://…` for TLS), a bearer
    token (API key or JWT), and for TLS an optional CA (PEM) and client certificate."""

    addr: str
    token: Optional[str] = None
    ca_pem: Optional[bytes] = None
    client_cert: Optional[Tuple[bytes, bytes]] = None
    #: The channel this client answers from (`askgate-channel`: "tui", the
    #: application's name; not one of the server's own), recorded with what it
    #: resolves and matched against an ask's `allowed_channels`.
    channel_name: Optional[str] = None

    def __repr__(self) -> str:  # never the token
        return f"Target(addr={self.addr!r}, token={'<redacted>' if self.token else None})"

    @classmethod
    def resolve(
        cls,
        addr: Optional[str],
        token: Optional[str],
        ca_pem: Optional[bytes],
        client_cert: Optional[Tuple[bytes, bytes]],
        channel: Optional[str] = None,
    ) -> "Target":
        """Arguments first, then `ASKGATE_ADDR` / `ASKGATE_TOKEN` /
        `ASKGATE_TOKEN_FILE`, then the local default."""
        addr = addr or os.environ.get("ASKGATE_ADDR") or DEFAULT_ADDR
        if token is None:
            token = os.environ.get("ASKGATE_TOKEN")
        if token is None and os.environ.get("ASKGATE_TOKEN_FILE"):
            with open(os.environ["ASKGATE_TOKEN_FILE"], encoding="utf-8") as file:
                token = file.read().strip()
        return cls(addr, token, ca_pem, client_cert, channel)

    @property
    def tls(self) -> bool:
        return self.addr.startswith("https://") or self.ca_pem is not None

    @property
    def host(self) -> str:
        return self.addr.split("://", 1)[-1].rstrip("/")

    def credentials(self) -> grpc.ChannelCredentials:
        key, chain = (self.client_cert[1], self.client_cert[0]) if self.client_cert else (None, None)
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca_pem, private_key=key, certificate_chain=chain
        )

    def channel(self, channels: Any) -> Any:
        """A channel to the target from `channels`: the `grpc` module (sync) or
        `grpc.aio`, which offer the same two constructors."""
        if self.tls:
            return channels.secure_channel(self.host, self.credentials())
        return channels.insecure_channel(self.host)

    def metadata(self) -> List[Tuple[str, str]]:
        metadata = [("authorization", f"Bearer {self.token}")] if self.token else []
        if self.channel_name:
            metadata.append(("askgate-channel", self.channel_name))
        return metadata


#: First and longest pause between attempts.
MIN_DELAY = 0.1
MAX_DELAY = 5.0


def backoff() -> Iterator[float]:
    """Pauses between attempts: exponential with full jitter, capped."""
    delay = MIN_DELAY
    while True:
        yield random.uniform(delay / 2, delay)
        delay = min(delay * 2, MAX_DELAY)


#: A failed attempt that waited at least this long at a server had reached it (the ask
#: was pending there): the failures before it are not part of the streak.
REACHED_A_SERVER = 1.0


class Retries:
    """When one ask tries again: on a retryable failure, with backoff, within the ask's
    deadline and while failures in a row last less than its retry budget."""

    def __init__(self, timeout: Optional[float], retry: bool, retry_for: float) -> None:
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.retry, self.retry_for = retry, retry_for
        self.delays = backoff()
        self.failing_since: Optional[float] = None

    def timeout(self) -> Optional[float]:
        """What is left of the deadline for the next attempt (None: no deadline);
        raises ASK_EXPIRED when nothing is left."""
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise AskgateError.local_deadline()
        return left

    def pause(self, attempt: float, error: AskgateError) -> float:
        """The pause before trying again after `error` (of the attempt that started at
        `attempt`); raises the error when there is no next attempt."""
        if error.code == grpc.StatusCode.DEADLINE_EXCEEDED and self.deadline is not None:
            raise AskgateError.local_deadline() from None
        now = time.monotonic()
        if error.reason is not Reason.UNSPECIFIED and now - attempt >= REACHED_A_SERVER:
            self.failing_since = now
        if self.failing_since is None:
            self.failing_since = attempt
        if not self.retry or not error.retryable or now - self.failing_since >= self.retry_for:
            raise error
        pause = next(self.delays)
        if self.deadline is not None:
            pause = min(pause, max(self.deadline - now, 0.0))
        return pause


class Stubs:
    """A channel and the stubs of askgate's services on it (both clients' runtimes)."""

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self.questions = rpc.UserQuestionsStub(channel)
        self.agents = rpc.AgentsStub(channel)
        self.webhooks = rpc.WebhooksStub(channel)
        self.slack = rpc.SlackStub(channel)
        self.receipts = rpc.ReceiptsStub(channel)
        self.people = rpc.PeopleStub(channel)
        self.policies = rpc.PoliciesStub(channel)
