#!/usr/bin/env python3
"""A real HTTPS server for the tests of clawvoice's offer POST over TLS (a Gateway-controlled
call's SDP offer, protocol-drift-2026-12b.md D1): Python's own `ssl` and `http.server`, a
certificate made per run with `cryptography`, so nothing of our TLS client is shared with it.

It listens on 127.0.0.1 only. Certificates (--cert):
  self       a self-signed leaf for 127.0.0.1 (trusted only by its pin)
  ca         a leaf for 127.0.0.1 signed by a throwaway CA (trusted through SSL_CERT_FILE=<ca>)
  ca-other   a leaf for other.invalid only, signed by that CA (the host name check must refuse it)

Routes (POST; the offer needs `Content-Type: application/sdp` and `Authorization: Bearer <secret>`):
  /offer     201 with an SDP answer starting "v=0"
  /big       200, "v=0" and 300 KiB more (over the 256 KiB limit)
  /html      200 with an HTML page (not SDP)
  /slow      answers after 3 s
  /short     says Content-Length 4000, sends 100 bytes, closes (no close_notify)

Usage: https_answer.py --dir D --secret S [--cert self|ca|ca-other]
Prints "listening <port> <sha256 of the leaf> <ca file or ->" once ready, then "served <path>"
for each request it read in full (a refused handshake never gets that far).
"""
import argparse, datetime, hashlib, http.server, ipaddress, os, ssl, sys, threading, time

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

ANSWER = ("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
          "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 127.0.0.1\r\na=rtpmap:111 opus/48000/2\r\n")


def name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_cert(subject_cn, sans, issuer_name, issuer_key, key, is_ca):
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(name(subject_cn)).issuer_name(issuer_name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if is_ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                                          encipher_only=False, decipher_only=False), critical=True)
    return b.sign(issuer_key, hashes.SHA256())


def write_pem(path, data):
    with open(path, "wb") as f:
        f.write(data)


def identity(kind, directory):
    """Writes leaf.pem / leaf.key (and ca.pem); returns (cert path, key path, ca path or None)."""
    key = ec.generate_private_key(ec.SECP256R1())
    loopback = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    ca_path = None
    if kind == "self":
        cert = make_cert("127.0.0.1", loopback, name("127.0.0.1"), key, key, False)
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = make_cert("clawvoice test CA", None, name("clawvoice test CA"), ca_key, ca_key, True)
        ca_path = os.path.join(directory, "ca.pem")
        write_pem(ca_path, ca.public_bytes(serialization.Encoding.PEM))
        sans = loopback if kind == "ca" else [x509.DNSName("other.invalid")]
        cert = make_cert("127.0.0.1" if kind == "ca" else "other.invalid", sans, ca.subject, ca_key, key, False)
    cert_path, key_path = os.path.join(directory, "leaf.pem"), os.path.join(directory, "leaf.key")
    write_pem(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    write_pem(key_path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    fingerprint = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()
    return cert_path, key_path, ca_path, fingerprint


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--secret", required=True)
    ap.add_argument("--cert", default="self", choices=["self", "ca", "ca-other"])
    args = ap.parse_args()
    cert_path, key_path, ca_path, fingerprint = identity(args.cert, args.dir)
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def reply(self, status, body, ctype="application/sdp", length=None):
            data = body.encode() if isinstance(body, str) else body
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data) if length is None else length))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                print("served", self.path, flush=True)
            if self.headers.get("Authorization") != f"Bearer {args.secret}" or self.headers.get("Content-Type") != "application/sdp":
                return self.reply(401, "bad secret or content type", "text/plain")
            if not body.startswith(b"v=0"):
                return self.reply(400, "the offer is not SDP", "text/plain")
            if self.path == "/offer":
                self.reply(201, ANSWER)
            elif self.path == "/big":
                self.reply(200, ANSWER + "a=x-pad:" + "x" * (300 * 1024) + "\r\n")
            elif self.path == "/html":
                self.reply(200, "<html><body>login</body></html>", "text/html")
            elif self.path == "/slow":
                time.sleep(3)
                self.reply(201, ANSWER)
            elif self.path == "/short":
                self.reply(201, ANSWER[:100], length=4000)
                self.close_connection = True
                # Drop TCP without close_notify: the client must not take the 100 bytes as the answer.
                self.connection.shutdown(2)
            else:
                self.reply(404, "no such route", "text/plain")

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_path, key_path)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print("listening", server.server_address[1], fingerprint, ca_path or "-", flush=True)
    # Stops when stdin closes (the test ends).
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
