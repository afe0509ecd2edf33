"""A real SMTP server for the email tests: aiosmtpd's SMTP implementation on
127.0.0.1, an ephemeral port. It prints the port on its first line, then one JSON line
per mail it takes: the envelope, the headers a test checks (decoded), and the plain-text
and HTML parts (decoded with the standard library's email parser, which refuses nothing
a real mail client would read, and reports what it cannot).

A mail whose headers or parts are malformed is reported with "defects"; the tests fail
on any.

With `--hold N`, the first N mails are held: the server reports `{"held": true}` and
never answers their DATA, so the sender cannot know whether they were taken (a test
kills it then); they are not recorded as mails.
"""

import asyncio
import email
import email.policy
import json
import sys

from aiosmtpd.smtp import SMTP


class Sink:
    def __init__(self, hold):
        self.hold = hold

    async def handle_DATA(self, server, session, envelope):
        if self.hold > 0:
            self.hold -= 1
            print(json.dumps({"held": True}), flush=True)
            await asyncio.Event().wait()
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        parts = {}
        defects = [str(d) for d in message.defects]
        for part in message.walk():
            defects.extend(str(d) for d in part.defects)
            if part.get_content_maintype() == "text":
                parts.setdefault(part.get_content_subtype(), part.get_content())
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "from": str(message["From"]),
            "to": str(message["To"]),
            "subject": str(message["Subject"]),
            "message_id": str(message["Message-ID"]),
            "in_reply_to": str(message.get("In-Reply-To", "")),
            "content_type": message.get_content_type(),
            "text": parts.get("plain", ""),
            "html": parts.get("html", ""),
            "defects": defects,
        }
        print(json.dumps(record), flush=True)
        return "250 OK"


async def main():
    loop = asyncio.get_running_loop()
    hold = int(sys.argv[sys.argv.index("--hold") + 1]) if "--hold" in sys.argv else 0
    sink = Sink(hold)
    server = await loop.create_server(lambda: SMTP(sink), "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    # Until the test closes our stdin (or dies).
    await loop.run_in_executor(None, sys.stdin.read)


asyncio.run(main())
