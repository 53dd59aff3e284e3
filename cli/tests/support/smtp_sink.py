#!/usr/bin/python3
"""A real SMTP server for the mail tests (aiosmtpd, Debian's python3-aiosmtpd).

Every accepted message is written to DIR/NNN.json: the envelope, the raw bytes, the
headers and the decoded text and HTML parts, as Python's email package reads them.
Faults, for the outbox tests:
  --hold      keep the final reply to the first message until DIR/release exists
              (the message is written first, so a test can crash the client meanwhile)
  --reject N  answer the first N messages with 451 (a temporary failure)
  --refuse    answer every message with 550 (a permanent failure)
Security, for the transport tests:
  --cert PEM --key PEM  with --starttls (STARTTLS required) or --implicit-tls (TLS first)
  --auth USER:PASSWORD  require this login (over TLS)
DIR/ready holds the port once the server listens.
"""
import argparse
import asyncio
import email
import email.policy
import json
import os
import signal
import ssl
import threading

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult


def unix(s):
    """The body with the line ends it was written with (SMTP carries CRLF)."""
    return s.replace("\r\n", "\n")


class Sink:
    def __init__(self, args):
        self.args = args
        self.seen = 0
        self.saved = 0

    def write(self, envelope):
        raw = envelope.content
        msg = email.message_from_bytes(raw, policy=email.policy.default)
        text = msg.get_body(("plain",))
        html = msg.get_body(("html",))
        # Every leaf part as a list reader sees it: its type, transfer encoding, file name
        # (attachments) and decoded text.
        parts = [
            {
                "content_type": part.get_content_type(),
                "transfer_encoding": str(part.get("Content-Transfer-Encoding", "")),
                "filename": part.get_filename(),
                "content": unix(part.get_content()),
            }
            for part in msg.walk()
            if not part.is_multipart()
        ]
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "raw": raw.decode("utf-8", "replace"),
            "headers": [[k, str(v)] for k, v in msg.items()],
            "content_type": msg.get_content_type(),
            "text": unix(text.get_content()) if text is not None else None,
            "html": unix(html.get_content()) if html is not None else None,
            "parts": parts,
        }
        self.saved += 1
        path = os.path.join(self.args.dir, "%03d.json" % self.saved)
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.rename(path + ".tmp", path)

    async def handle_DATA(self, server, session, envelope):
        self.seen += 1
        if self.args.refuse:
            return "550 5.7.1 refused by the test sink"
        if self.seen <= self.args.reject:
            return "451 4.3.0 try again later (test sink)"
        self.write(envelope)
        if self.args.hold and self.saved == 1:
            release = os.path.join(self.args.dir, "release")
            while not os.path.exists(release):
                await asyncio.sleep(0.05)
        return "250 OK"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--hold", action="store_true")
    p.add_argument("--reject", type=int, default=0)
    p.add_argument("--refuse", action="store_true")
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--starttls", action="store_true")
    p.add_argument("--implicit-tls", action="store_true")
    p.add_argument("--auth")
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    kwargs = {}
    if args.cert:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(args.cert, args.key)
        if args.implicit_tls:
            kwargs["ssl_context"] = ctx
        else:
            kwargs["tls_context"] = ctx
            kwargs["require_starttls"] = args.starttls
    if args.auth:
        user, password = args.auth.split(":", 1)

        def check(server, session, envelope, mechanism, auth_data):
            ok = auth_data.login.decode() == user and auth_data.password.decode() == password
            return AuthResult(success=ok)

        kwargs["authenticator"] = check
        kwargs["auth_required"] = True
        # aiosmtpd only knows of TLS it started itself (STARTTLS); implicit TLS is TLS too.
        kwargs["auth_require_tls"] = bool(args.cert) and not args.implicit_tls
    controller = Controller(Sink(args), hostname="127.0.0.1", port=args.port, **kwargs)
    controller.start()
    with open(os.path.join(args.dir, "ready"), "w") as f:
        f.write(str(args.port))
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    controller.stop()


if __name__ == "__main__":
    main()
