"""A webhook receiver for askgate's integration tests.

It verifies every request's signature with the Standard Webhooks reference library
(`standardwebhooks` from PyPI, independent of askgate's own signing), records what it
received, and answers as the test scripted: 2xx, an error status, a hang past the
sender's timeout, or a dropped connection.

    python receiver.py [--port N]

prints `listening <port>` on its first line, then serves on 127.0.0.1 until killed.

Control API (JSON):
- POST /_control/paths {"path": "/a", "secret": "whsec_...", "script": ["500", "ok"]}:
  how requests to `path` are answered, in order ("ok": 204; a number: that status;
  "hang": no answer for 60 s; "close": the connection is dropped); past the script's
  end, "ok". A path with no secret configured yet answers 503 (so the sender retries).
- GET /_control/received: every request received so far, oldest first.
"""

import argparse
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook

MAX_BODY = 4 * 1024 * 1024

lock = threading.Lock()
paths = {}  # path -> {"secret": str, "script": [str]}
received = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def reply(self, status, payload=None):
        body = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(min(length, MAX_BODY))

    def do_GET(self):
        if self.path == "/_control/received":
            with lock:
                self.reply(200, received)
        else:
            self.reply(404)

    def do_POST(self):
        data = self.body()
        if self.path == "/_control/paths":
            config = json.loads(data)
            with lock:
                paths[config["path"]] = {
                    "secret": config["secret"],
                    "script": list(config.get("script", [])),
                }
            self.reply(200, {})
            return
        with lock:
            config = paths.get(self.path)
            action = config["script"].pop(0) if config and config["script"] else "ok"
        entry = {
            "path": self.path,
            "id": self.headers.get("webhook-id"),
            "timestamp": self.headers.get("webhook-timestamp"),
            "at": time.time(),
            "answered": action,
            "verified": False,
            "error": None,
            "payload": None,
        }
        if config is None:
            entry["error"] = "no secret configured for this path"
            action = "503"
        else:
            try:
                headers = {k.lower(): v for k, v in self.headers.items()}
                entry["payload"] = Webhook(config["secret"]).verify(data, headers)
                entry["verified"] = True
            except Exception as e:  # noqa: BLE001 - any failure is recorded
                entry["error"] = f"{type(e).__name__}: {e}"
        with lock:
            received.append(entry)
        if action == "ok":
            self.reply(204)
        elif action == "hang":
            time.sleep(60)
        elif action == "close":
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
        else:
            self.reply(int(action), {"error": "scripted"})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.daemon_threads = True
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
