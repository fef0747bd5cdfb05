import Foundation
import Testing
import RelayCore
import RelayStore
import RelayTestSupport

/// A TLS WebSocket client in Python's standard library: handshake over TLS, then either report
/// the server certificate's SHA-256 and TLS version ("probe") or hold an app socket for a few
/// seconds and prove it still relays ("hold": expects the relay's device_offline answer).
let wssClientScript = #"""
import socket, ssl, sys, time, hashlib, struct
port, mode, device, token = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="localhost")
s.sendall(("GET /ws/app?device_id=%s&token=%s HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
           "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
           % (device, token)).encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
print("status", head.split(b" ")[1].decode(), flush=True)
print("cert", hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest(), flush=True)
print("version", s.version(), flush=True)
print("alpn", s.selected_alpn_protocol(), flush=True)
def frame():
    b0, b1 = s.recv(1)[0], s.recv(1)[0]
    n = b1 & 127
    if n == 126: n = struct.unpack(">H", s.recv(2))[0]
    data = b""
    while len(data) < n: data += s.recv(n - len(data))
    return b0 & 15, data
if mode == "hold":
    frame()  # device_status
    time.sleep(3)
    msg = b'{"type":"hello"}'
    s.sendall(bytes([0x81, 0x80 | len(msg), 0, 0, 0, 0]) + msg)
    while True:
        op, data = frame()
        if op == 1:
            print("alive", data.decode(), flush=True)
            break
"""#

@Suite struct TLSTests {
    func makeCertificate(_ dir: String, name: String) throws {
        let r = try Subprocess.run(["/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                                    "-subj", "/CN=\(name)", "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem"])
        guard r.status == 0 else { throw TestSetupError("openssl: \(r.stderr)") }
    }

    func client(_ port: Int, _ mode: String, token: String) throws -> ChildProcess {
        try ChildProcess(["/usr/bin/env", "python3", "-c", wssClientScript, String(port), mode, "dev1", token],
                         environment: ProcessInfo.processInfo.environment)
    }

    func output(_ child: ChildProcess) -> [String: String] {
        let text = String(decoding: ChildProcess.readAll(child.stdoutFD), as: UTF8.self)
        child.waitForExit()
        var out: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
            if parts.count == 2 { out[parts[0]] = parts[1] }
        }
        return out
    }

    @Test func wssHandshakeModernTLSAndCertificateReloadOnSIGHUP() throws {
        let dir = try TestEnvironment.scratchDirectory("tls")
        try makeCertificate(dir, name: "relay-first")
        let database = try TestDatabase()
        defer { database.drop() }
        let db = try database.connect()
        try DeviceRepository(db).add(DeviceID("dev1")!, name: "", actor: "t")
        let token = try TokenRepository(db).issue(device: DeviceID("dev1")!, role: .app, label: "", expiresIn: nil, actor: "t").secret
        let relay = try RelayDaemon(databaseURL: database.url,
                                    environment: ["WIMZ_TLS_CERT": dir + "/cert.pem", "WIMZ_TLS_KEY": dir + "/key.pem"])
        #expect(relay.waitForLog(containing: "credentials_loaded") != nil)

        // With TLS served by lws a handshake cannot wait for the store: a token not in memory yet
        // is answered 503 (Retry-After: 1) while it is read, and the retry connects.
        let cold = output(try client(relay.port, "probe", token: token))
        #expect(cold["status"] == "503")
        usleep(500_000)
        let first = output(try client(relay.port, "probe", token: token))
        #expect(first["status"] == "101")
        #expect(first["version"] == "TLSv1.3" || first["version"] == "TLSv1.2")
        #expect(first["alpn"] == "http/1.1" || first["alpn"] == "None")

        // A live wss connection, then a new certificate and SIGHUP.
        let holder = try client(relay.port, "hold", token: token)
        usleep(800_000)
        try makeCertificate(dir, name: "relay-second")
        kill(relay.pid, SIGHUP)
        #expect(relay.waitForLog(containing: "tls_reloaded") != nil)
        let second = output(try client(relay.port, "probe", token: token))
        #expect(second["status"] == "101")
        #expect(second["cert"] != nil && second["cert"] != first["cert"])
        // The connection opened before the reload still works afterwards.
        let held = output(holder)
        #expect(held["alive"]?.contains("device_offline") == true)
        #expect(relay.stop() == 0)
    }

    @Test func tlsVersionsBelow1_2AreRefused() throws {
        let dir = try TestEnvironment.scratchDirectory("tls-old")
        try makeCertificate(dir, name: "relay")
        let relay = try RelayDaemon(databaseURL: "host=/nonexistent-wimz dbname=x",
                                    environment: ["WIMZ_TLS_CERT": dir + "/cert.pem", "WIMZ_TLS_KEY": dir + "/key.pem"])
        let old = try Subprocess.run(["/usr/bin/openssl", "s_client", "-connect", "127.0.0.1:\(relay.port)", "-tls1_1",
                                      "-cipher", "DEFAULT@SECLEVEL=0"])
        // Refused with a protocol_version alert: no cipher is ever agreed.
        #expect(old.stdout.contains("Cipher is (NONE)"))
        #expect(old.stderr.contains("protocol version"))
        let modern = try Subprocess.run(["/usr/bin/openssl", "s_client", "-connect", "127.0.0.1:\(relay.port)", "-tls1_2"])
        #expect(modern.stdout.contains("Protocol  : TLSv1.2") && !modern.stdout.contains("Cipher is (NONE)"))
        relay.stop()
    }

    @Test func onlyForwardSecretAEADSuitesAreOffered() throws {
        let dir = try TestEnvironment.scratchDirectory("tls-suites")
        try makeCertificate(dir, name: "relay")
        let relay = try RelayDaemon(databaseURL: "host=/nonexistent-wimz dbname=x",
                                    environment: ["WIMZ_TLS_CERT": dir + "/cert.pem", "WIMZ_TLS_KEY": dir + "/key.pem"])
        func agreed(_ suite: String) throws -> Bool {
            let r = try Subprocess.run(["/usr/bin/openssl", "s_client", "-connect", "127.0.0.1:\(relay.port)", "-tls1_2",
                                        "-cipher", "\(suite)@SECLEVEL=0"])
            return r.stdout.contains("Cipher is \(suite)")
        }
        // No forward secrecy (RSA key exchange, static DH) or no AEAD (CBC with HMAC): refused.
        for suite in ["AES128-SHA", "AES256-SHA256", "AES128-GCM-SHA256", "ECDHE-RSA-AES128-SHA", "ECDHE-RSA-AES256-SHA384",
                      "DHE-RSA-AES128-GCM-SHA256", "DES-CBC3-SHA"] {
            #expect(try !agreed(suite), "\(suite) was agreed")
        }
        for suite in ["ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-CHACHA20-POLY1305"] {
            #expect(try agreed(suite), "\(suite) was refused")
        }
        relay.stop()
    }
}

