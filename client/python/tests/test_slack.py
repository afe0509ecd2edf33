"""`who_am_i`, and the Slack admin calls against a real askgate posting to a fake Slack
Web API here (it checks the bot token and records what askgate sends), sync and
asyncio."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List

import pytest

from askgate import Ask, AskgateError, AsyncClient, Client, Reason, question

from conftest import Server, eventually

TOKEN = "xoxb-python-sdk"


class FakeSlack:
    """auth.test, chat.postMessage and chat.update, each checking the bot token."""

    def __init__(self) -> None:
        self.calls: List[Dict[str, Any]] = []
        calls = self.calls

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])) or b"null")
                method = self.path.removeprefix("/api/")
                authorized = self.headers.get("authorization") == f"Bearer {TOKEN}"
                calls.append({"method": method, "body": body, "authorized": authorized})
                if not authorized:
                    reply: Dict[str, Any] = {"ok": False, "error": "invalid_auth"}
                elif method == "auth.test":
                    reply = {"ok": True, "team_id": "T7"}
                else:
                    reply = {"ok": True, "channel": "C1", "ts": "1.000001"}
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/api"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack()
    yield fake
    fake.http.shutdown()


@pytest.fixture
def slack_server(slack: FakeSlack) -> Iterator[Server]:
    server = Server("--slack-api-url", slack.url)
    yield server
    server.stop()


def test_who_am_i_names_the_caller(slack_server: Server) -> None:
    with Client(slack_server.addr) as client:
        me = client.who_am_i()
    assert (me.tenant, me.subject, list(me.roles), me.every_session) == ("default", "anonymous", ["agent", "ui", "admin"], True)
    assert not me.HasField("expires_at")


def test_a_slack_app_is_connected_posts_and_is_disconnected(slack: FakeSlack, slack_server: Server) -> None:
    with Client(slack_server.addr) as client:
        with pytest.raises(AskgateError) as refused:
            client.connect_slack("xoxb-wrong", "s", "C1")
        assert refused.value.reason == Reason.BAD_REQUEST
        assert "invalid_auth" in str(refused.value)

        app = client.connect_slack(TOKEN, "signing", "C1", session_prefix="ops/", labels={"team": "infra"})
        assert (app.team_id, app.channel, app.provides) == ("T7", "C1", True)
        listed = client.list_slack_apps()
        assert [a.id for a in listed] == [app.id]
        assert TOKEN not in str(listed) and "signing" not in str(listed), "no secret comes back"

        # Posted by askgate once asked in ops/ with the app's label.
        done = threading.Event()

        def ask() -> None:
            try:
                client.ask(Ask("ops/1", [question("q", "Restart?", options=["yes", "no"])], labels={"team": "infra"}))
            except AskgateError:
                pass
            finally:
                done.set()

        threading.Thread(target=ask, daemon=True).start()
        posted = eventually("the post", lambda: [c for c in slack.calls if c["method"] == "chat.postMessage"])
        assert posted[0]["authorized"] and "Restart?" in json.dumps(posted[0]["body"]["blocks"])

        client.disconnect_slack(app.id)
        assert client.list_slack_apps() == []
        with pytest.raises(AskgateError) as gone:
            client.disconnect_slack(app.id)
        assert gone.value.reason == Reason.NOT_FOUND
        pending = client.list_pending("ops/1")
        client.cancel("ops/1", pending[0].rpc_id, "done")
        assert done.wait(10)


def test_the_asyncio_client_has_the_same_calls(slack_server: Server) -> None:
    async def run() -> None:
        async with AsyncClient(slack_server.addr) as client:
            me = await client.who_am_i()
            assert me.subject == "anonymous"
            app = await client.connect_slack(TOKEN, "signing", "C2", description="async")
            assert [a.description for a in await client.list_slack_apps()] == ["async"]
            await client.disconnect_slack(app.id)
            assert await client.list_slack_apps() == []

    asyncio.run(run())
