import Foundation

/// Checks JSON values against the response schemas of an OpenAPI 3 document: `type`,
/// `nullable`, `required`, `properties`, `items`, `enum` and `$ref` — what docs/openapi.json uses.
public struct OpenAPIChecker {
    let document: [String: Any]

    public init(path: String) throws {
        guard let doc = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
        else { throw TestSetupError("not a JSON object: \(path)") }
        document = doc
    }

    /// Problems found for `body` as the `status` response of `method` on `pathTemplate` (empty: conforms).
    public func problems(_ body: Any, path pathTemplate: String, method: String, status: Int) -> [String] {
        guard let paths = document["paths"] as? [String: Any], let item = paths[pathTemplate] as? [String: Any] else {
            return ["path \(pathTemplate) is not documented"]
        }
        guard let op = item[method.lowercased()] as? [String: Any], let responses = op["responses"] as? [String: Any] else {
            return ["\(method) \(pathTemplate) is not documented"]
        }
        guard let response = responses[String(status)] as? [String: Any] else {
            return ["\(method) \(pathTemplate) does not document status \(status)"]
        }
        guard let content = response["content"] as? [String: Any], let json = content["application/json"] as? [String: Any],
              let schema = json["schema"] as? [String: Any] else { return [] }
        return check(body, schema, at: "$")
    }

    private func resolve(_ schema: [String: Any]) -> [String: Any] {
        guard let ref = schema["$ref"] as? String else { return schema }
        var node: Any = document
        for part in ref.dropFirst(2).split(separator: "/") { node = (node as? [String: Any])?[String(part)] ?? [:] }
        return node as? [String: Any] ?? [:]
    }

    private func check(_ value: Any, _ rawSchema: [String: Any], at path: String) -> [String] {
        let schema = resolve(rawSchema)
        if value is NSNull { return schema["nullable"] as? Bool == true ? [] : ["\(path): null but not nullable"] }
        var problems: [String] = []
        switch schema["type"] as? String {
        case "object":
            guard let object = value as? [String: Any] else { return ["\(path): expected object"] }
            for key in schema["required"] as? [String] ?? [] where object[key] == nil { problems.append("\(path).\(key): missing") }
            let properties = schema["properties"] as? [String: Any] ?? [:]
            for (key, sub) in properties {
                if let v = object[key], let s = sub as? [String: Any] { problems += check(v, s, at: "\(path).\(key)") }
            }
        case "array":
            guard let array = value as? [Any] else { return ["\(path): expected array"] }
            if let items = schema["items"] as? [String: Any] {
                for (i, v) in array.enumerated() { problems += check(v, items, at: "\(path)[\(i)]") }
            }
        case "string":
            guard let s = value as? String else { return ["\(path): expected string"] }
            if let allowed = schema["enum"] as? [String], !allowed.contains(s) { problems.append("\(path): \(s) not in \(allowed)") }
        case "integer":
            guard let n = value as? NSNumber, n.doubleValue == n.doubleValue.rounded(), "\(n)" != "true", "\(n)" != "false"
            else { return ["\(path): expected integer"] }
        case "boolean":
            guard value is Bool else { return ["\(path): expected boolean"] }
        default:
            break
        }
        return problems
    }
}
