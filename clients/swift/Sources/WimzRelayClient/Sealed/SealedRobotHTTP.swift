import Foundation
import WimzProtocol

// The robot's REST API on a sealed device (docs/protocol.md "Sealed devices (v1.5)"): the relay
// refuses plain HTTP to it, so a call travels as a sealed `http_request` frame on this client's
// socket and its answer as sealed `http_response` (and `http_body`) frames, which only members
// open. The robot applies the roster's roles itself.

/// The robot's answer to a call of its API.
public struct RobotHTTPResponse: Sendable, Equatable {
    public var status: Int
    /// The robot's header fields, names in lower case (a repeated one as an array).
    public var headers: JSON
    public var body: Data
}

extension RelayClient {
    /// The largest request body a sealed call carries (the bridge's own default; the relay's for
    /// plain calls). Over one part it goes in parts, as answers come: the `http_request` with the
    /// first and `"more":true`, then `http_body` frames.
    public static let sealedRequestBodyLimit = WimzProtocol.defaultRobotHTTPMaxBody
    /// The largest answer body taken (the bridge's own default; the relay's for plain calls).
    public static let sealedResponseBodyLimit = WimzProtocol.defaultRobotHTTPMaxBody
    /// Parts sent at once before the rest are spaced at the relay's per-socket rate (20 a second,
    /// 40 at once), so that a large body leaves room for the socket's other frames.
    static let requestPartsAtOnce = 16

    /// Calls the robot's API on a sealed device, e.g. `robotRequest("GET", path: "/mode")`.
    /// - Throws: ``RelayClientError/http(status:code:message:)`` 413 `too_large` for a body over
    ///   ``sealedRequestBodyLimit``, what ``send(command:data:timeout:)`` throws (the relay's
    ///   refusals: `forbidden_type` when the device is not sealed; offline, timeout, cancellation),
    ///   and ``RelayClientError/invalidResponse(_:)`` for an answer over
    ///   ``sealedResponseBodyLimit`` or not as the contract has it.
    public func robotRequest(_ method: String, path: String, query: String? = nil, headers: [String: String] = [:],
                             body: Data? = nil, timeout: Duration? = nil) async throws -> RobotHTTPResponse {
        if let body, body.count > Self.sealedRequestBodyLimit {
            throw RelayClientError.http(status: 413, code: ErrorCode.tooLarge.rawValue,
                                        message: "a sealed request body is at most \(Self.sealedRequestBodyLimit) bytes")
        }
        let partSize = WimzProtocol.robotHTTPChunkBytes
        let parts = body.map { body in stride(from: 0, to: body.count, by: partSize).map { body.subdata(in: $0..<min($0 + partSize, body.count)) } } ?? []
        let answer = try await awaitAnswer(timeout: timeout, { id in
            .object(["type": .string(WimzProtocol.MessageType.httpRequest), "id": .string(id), "method": .string(method),
                     "path": .string(path), "query": query.map(JSON.string) ?? .null,
                     "headers": .object(headers.mapValues(JSON.string)),
                     "body": parts.first.map { .string($0.base64EncodedString()) } ?? .null, "more": .bool(parts.count > 1)])
        }, then: { id in
            parts.dropFirst().enumerated().map { index, part in
                .object(["type": .string(WimzProtocol.MessageType.httpBody), "id": .string(id),
                         "body": .string(part.base64EncodedString()), "more": .bool(index + 2 < parts.count)])
            }
        }).message
        guard let status = answer["status"]?.intValue, let body = answer["body"]?.stringValue.flatMap({ Data(base64Encoded: $0) })
        else { throw RelayClientError.invalidResponse("http_response: \(answer.text.prefix(200))") }
        return RobotHTTPResponse(status: status, headers: answer["headers"] ?? [:], body: body)
    }

    /// An opened `http_response` or `http_body` frame: kept until its last part, then the
    /// waiting call gets the first frame with the whole body. Another app's answers (every app
    /// of a sealed device receives them) are dropped.
    func receiveRobotHTTP(_ id: String, _ frame: JSON) {
        guard pending[id] != nil else { return }
        var part = Data()
        if case .string(let text)? = frame["body"] {
            guard let data = Data(base64Encoded: text) else {
                return resolve(id, .failure(RelayClientError.invalidResponse("the robot's answer: a body that is not base64")))
            }
            part = data
        }
        let answer: JSON, body: Data
        if frame["type"]?.stringValue == WimzProtocol.MessageType.httpResponse {
            (answer, body) = (frame, part)
        } else if let started = robotHTTPParts[id] {
            (answer, body) = (started.answer, started.body + part)
        } else {
            return resolve(id, .failure(RelayClientError.invalidResponse("http_body before its http_response")))
        }
        guard body.count <= Self.sealedResponseBodyLimit else {
            return resolve(id, .failure(RelayClientError.invalidResponse("the robot's answer is over \(Self.sealedResponseBodyLimit) bytes")))
        }
        if frame["more"]?.boolValue == true {
            robotHTTPParts[id] = (answer, body)
            return
        }
        guard case .object(var members) = answer else { return }
        members["body"] = .string(body.base64EncodedString())
        resolve(id, .success(CommandResponse(id: id, ok: true, data: .null, error: nil, message: .object(members))))
    }
}
