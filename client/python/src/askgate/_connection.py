"""Where askgate is and how to reach it; when to try again."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

import grpc

DEFAULT_ADDR = "http://127.0.0.1:50051"


@dataclass(frozen=True)
class Target:
    """An askgate server: its address (`http://host:port`, `https://…` for TLS), a bearer
    token (API key or JWT), and for TLS an optional CA (PEM) and client certificate."""

    addr: str
    token: Optional[str] = None
    ca_pem: Optional[bytes] = None
    client_cert: Optional[Tuple[bytes, bytes]] = None

    def __repr__(self) -> str:  # never the token
        return f"Target(addr={self.addr!r}, token={'<redacted>' if self.token else None})"

    @classmethod
    def resolve(
        cls,
        addr: Optional[str],
        token: Optional[str],
        ca_pem: Optional[bytes],
        client_cert: Optional[Tuple[bytes, bytes]],
    ) -> "Target":
        """Arguments first, then `ASKGATE_ADDR` / `ASKGATE_TOKEN` /
        `ASKGATE_TOKEN_FILE`, then the local default."""
        addr = addr or os.environ.get("ASKGATE_ADDR") or DEFAULT_ADDR
        if token is None:
            token = os.environ.get("ASKGATE_TOKEN")
        if token is None and os.environ.get("ASKGATE_TOKEN_FILE"):
            with open(os.environ["ASKGATE_TOKEN_FILE"], encoding="utf-8") as file:
                token = file.read().strip()
        return cls(addr, token, ca_pem, client_cert)

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

    def metadata(self) -> List[Tuple[str, str]]:
        return [("authorization", f"Bearer {self.token}")] if self.token else []


#: First and longest pause between attempts.
MIN_DELAY = 0.1
MAX_DELAY = 5.0


def backoff() -> Iterator[float]:
    """Pauses between attempts: exponential with full jitter, capped."""
    delay = MIN_DELAY
    while True:
        yield random.uniform(delay / 2, delay)
        delay = min(delay * 2, MAX_DELAY)
