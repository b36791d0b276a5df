"""A small IMAP4rev1 server in this process, for the polled mailbox's tests: one account, one folder (INBOX),
the commands a client reading unseen mail uses (CAPABILITY, LOGIN, SELECT, UID SEARCH, UID FETCH, UID STORE,
EXPUNGE, NOOP, LOGOUT). Mail is put in with `deliver`; `seen` tells which mails the client marked."""

from __future__ import annotations

import re
import socketserver
import threading
from dataclasses import dataclass, field

import pytest

USER, PASSWORD = "desk@shop.example", "mailbox-password"


@dataclass
class Mailbox:
    mails: list[bytes] = field(default_factory=list)  # uid = index + 1
    flags: dict[int, set] = field(default_factory=dict)
    logins: list[tuple[str, bool]] = field(default_factory=list)  # (user, accepted)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def deliver(self, raw: bytes) -> int:
        with self.lock:
            self.mails.append(raw)
            uid = len(self.mails)
            self.flags[uid] = set()
            return uid

    def seen(self) -> set[int]:
        return {uid for uid, flags in self.flags.items() if "\\Seen" in flags}


class _Handler(socketserver.StreamRequestHandler):
    def send(self, line: str | bytes) -> None:
        self.wfile.write((line.encode() if isinstance(line, str) else line) + b"\r\n")

    def handle(self) -> None:
        box: Mailbox = self.server.mailbox
        self.send("* OK IMAP4rev1 test server ready")
        while True:
            line = self.rfile.readline()
            if not line:
                return
            tag, _, rest = line.decode().rstrip("\r\n").partition(" ")
            command, _, args = rest.partition(" ")
            command = command.upper()
            if command == "UID":
                command, _, args = args.partition(" ")
                command = "UID " + command.upper()
            if command == "CAPABILITY":
                self.send("* CAPABILITY IMAP4rev1")
                self.send(f"{tag} OK CAPABILITY done")
            elif command == "LOGIN":
                user, password = [p.strip('"') for p in re.findall(r'"[^"]*"|\S+', args)[:2]]
                accepted = (user, password) == (USER, PASSWORD)
                box.logins.append((user, accepted))
                self.send(f"{tag} OK LOGIN done" if accepted else f"{tag} NO [AUTHENTICATIONFAILED] wrong password")
            elif command == "SELECT":
                self.send(f"* {len(box.mails)} EXISTS")
                self.send("* 0 RECENT")
                self.send("* OK [UIDVALIDITY 1] UIDs valid")
                self.send(f"{tag} OK [READ-WRITE] SELECT done")
            elif command == "UID SEARCH":
                with box.lock:
                    uids = [uid for uid in sorted(box.flags) if "UNSEEN" not in args.upper()
                            or "\\Seen" not in box.flags[uid]]
                self.send("* SEARCH" + "".join(f" {uid}" for uid in uids))
                self.send(f"{tag} OK SEARCH done")
            elif command == "UID FETCH":
                uid = int(args.split(" ", 1)[0])
                raw = box.mails[uid - 1]
                flags = " ".join(sorted(box.flags[uid]))
                self.send(f"* {uid} FETCH (UID {uid} FLAGS ({flags}) RFC822.SIZE {len(raw)} BODY[] {{{len(raw)}}}")
                self.wfile.write(raw)
                self.send(")")
                self.send(f"{tag} OK FETCH done")
            elif command == "UID STORE":
                uid_set, action, flags = args.split(" ", 2)
                for uid in (int(u) for u in uid_set.split(",")):
                    with box.lock:
                        names = set(flags.strip("()").split())
                        box.flags[uid] = box.flags[uid] | names if action.startswith("+") else box.flags[uid] - names
                    self.send(f"* {uid} FETCH (UID {uid} FLAGS ({' '.join(sorted(box.flags[uid]))}))")
                self.send(f"{tag} OK STORE done")
            elif command in ("EXPUNGE", "NOOP", "CLOSE"):
                self.send(f"{tag} OK {command} done")
            elif command == "LOGOUT":
                self.send("* BYE logging out")
                self.send(f"{tag} OK LOGOUT done")
                return
            else:
                self.send(f"{tag} BAD unknown command {command}")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture
def imap_server(settings):
    """A running server with an empty INBOX; the desk's settings point at it."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.mailbox = Mailbox()
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    settings.INBOUND_IMAP_HOST = "127.0.0.1"
    settings.INBOUND_IMAP_PORT = server.server_address[1]
    settings.INBOUND_IMAP_SSL = False
    settings.INBOUND_IMAP_USER, settings.INBOUND_IMAP_PASSWORD = USER, PASSWORD
    settings.INBOUND_IMAP_FOLDER = "INBOX"
    try:
        yield server.mailbox
    finally:
        server.shutdown()
        server.server_close()
